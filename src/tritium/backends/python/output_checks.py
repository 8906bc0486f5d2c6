"""Outputs a model returns that its config does not describe: warned about once each.

Triton's Python backend returns an output whose datatype or shape differs from the config
as the model made it, and drops one the config does not name (or that the request did not
ask for). Either is usually a bug in ``model.py`` that nothing else reports, so the worker
logs a warning the first time it sees it for an output of its model (not per request).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tritium.backends.python.pb_utils_logger import Logger


class OutputChecks:
    """The config's outputs (name -> wire datatype, dims) and the ones warned about."""

    __slots__ = ("batched", "model", "specs", "warned")

    def __init__(self, config: dict[str, Any]) -> None:
        self.model = str(config.get("name", ""))
        self.batched = int(config.get("max_batch_size", 0) or 0) > 0
        self.specs: dict[str, tuple[str, tuple[int, ...]]] = {}
        for output in config.get("output", ()):
            datatype = str(output.get("data_type", ""))
            wire = datatype.removeprefix("TYPE_")
            wire = "BYTES" if wire == "STRING" else wire
            reshape = output.get("reshape")
            # With a reshape the model produces the reshape's shape; clients see dims.
            dims = reshape.get("shape", ()) if isinstance(reshape, dict) else output.get("dims", ())
            self.specs[str(output.get("name", ""))] = (wire, tuple(int(d) for d in dims))
        self.warned: set[str] = set()

    def not_in_config(self, name: str) -> None:
        """An output the model returned that the config does not name (it is dropped)."""
        if name in self.specs or name in self.warned:
            return
        self.warned.add(name)
        Logger.log_warn(
            f"model '{self.model}' returned output '{name}', which is not in its config; "
            "it is dropped (this warning is given once per output)"
        )

    def check(self, name: str, wire: str, shape: Sequence[int]) -> None:
        """Warn (once) when an output's datatype or shape differs from the config's."""
        if name in self.warned:
            return
        spec = self.specs.get(name)
        if spec is None:
            return
        expected, dims = spec
        got = tuple(shape[1:]) if self.batched and len(shape) > 0 else tuple(shape)
        if wire == expected and _fits(got, dims):
            return
        self.warned.add(name)
        batch = "[batch] + " if self.batched else ""
        Logger.log_warn(
            f"model '{self.model}' returned output '{name}' as {wire} with shape "
            f"{list(shape)}, but its config says {expected} with dims {batch}{list(dims)}; "
            "it is returned as the model made it (this warning is given once per output)"
        )


def _fits(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    if len(shape) != len(dims):
        return False
    return all(d == -1 or d == s for s, d in zip(shape, dims))
