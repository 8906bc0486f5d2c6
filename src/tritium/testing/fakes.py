"""Fakes for deterministic tests: the runners schedulers drive, the transport a protocol
writes to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tritium.core import InferRequest, InferResponse
from tritium.core.errors import InstanceDown, Unavailable


class FakeRunner:
    """A Runner (see ``tritium.scheduling.Runner``) that completes batches only when the
    test says so: ``finish()``, ``die()`` then ``revive()``; it asserts that it is never
    given a second batch while busy."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.running = True
        self.inflight: list[tuple[list[InferRequest], asyncio.Future[list[InferResponse]]]] = []
        self.batches: list[list[str]] = []
        self.cancelled: list[InferRequest] = []
        self.ready_callbacks: list[Callable[[], None]] = []
        self.failure_callbacks: list[Callable[[], None]] = []

    def submit(self, batch: list[InferRequest]) -> asyncio.Future[list[InferResponse]]:
        if not self.running:
            raise InstanceDown(f"instance '{self.name}' is not running")
        assert not self.inflight, "a busy runner was given a second batch"
        fut: asyncio.Future[list[InferResponse]] = asyncio.get_running_loop().create_future()
        self.inflight.append((batch, fut))
        self.batches.append([r.id for r in batch])
        return fut

    def finish(self, responses: list[InferResponse] | None = None) -> None:
        batch, fut = self.inflight.pop()
        if responses is None:
            responses = [InferResponse(r.model_name, "1", r.id) for r in batch]
        fut.set_result(responses)

    def die(self) -> None:
        batch, fut = self.inflight.pop()
        self.running = False
        fut.set_exception(Unavailable(f"instance '{self.name}' exited unexpectedly"))

    def revive(self) -> None:
        self.running = True
        callbacks, self.ready_callbacks = self.ready_callbacks, []
        for cb in callbacks:
            cb()

    def cancel(self, request: InferRequest) -> None:
        self.cancelled.append(request)

    def when_ready(self, callback: Callable[[], None]) -> None:
        if self.running:
            callback()
        else:
            self.ready_callbacks.append(callback)

    def on_restart_failure(self, callback: Callable[[], None]) -> None:
        self.failure_callbacks.append(callback)


class FakeTransport(asyncio.Transport):
    """What a connection's protocol writes to: keeps the bytes, notes closing and the
    reading pauses the protocol asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()
        self.closed = False
        self.reading = True
        self.pauses = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "write after close"
        self.data += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0  # every write is taken at once

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True
