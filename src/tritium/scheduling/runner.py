"""What a scheduler drives: something that executes one batch at a time."""

from __future__ import annotations

from typing import Protocol

from tritium.core import InferRequest, InferResponse


class Runner(Protocol):
    name: str

    async def execute(self, batch: list[InferRequest]) -> list[InferResponse]: ...
