"""µs per encode + decode of one batch's control messages, three ways.

The exec message of a one-request add_sub batch (two inputs, two outputs) and its result,
each encoded and decoded once per round:

- ``dict+orjson``: untyped dicts through orjson (the codec before ``ipc.messages``);
- ``dataclass+orjson``: the same kinds as ``slots=True, frozen=True`` dataclasses, built
  from orjson's dicts on decode (nested items left as dicts);
- ``msgspec``: ``tritium.ipc.messages`` as used, tagged structs with typed items.

    .venv/bin/python bench/ipc_messages.py [--rounds N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import orjson

from tritium.ipc import messages

_DICT_EXEC = {
    "op": "exec",
    "requests": [
        {
            "id": "",
            "corr": 0,
            "flags": 0,
            "params": {},
            "outputs": ["OUTPUT0", "OUTPUT1"],
            "inputs": [["INPUT0", "FP32", [4], 16], ["INPUT1", "FP32", [4], 16]],
        }
    ],
    "poll": 1,
}
_DICT_RESULT = {
    "op": "result",
    "responses": [{"outputs": [["OUTPUT0", "FP32", [4], 16], ["OUTPUT1", "FP32", [4], 16]]}],
    "t": [1234, 5678, 910],
    "end": 128,
}


@dataclasses.dataclass(slots=True, frozen=True)
class _Exec:
    requests: list[Any]
    slots: list[int] | None = None
    refs: list[Any] | None = None
    keep: int = 0
    poll: bool = False


@dataclasses.dataclass(slots=True, frozen=True)
class _Result:
    responses: list[Any]
    t: list[int]
    end: int = 0
    kept: int = 0
    ready: bool | None = None


_KINDS: dict[str, Any] = {"exec": _Exec, "result": _Result}
_OPS = {_Exec: "exec", _Result: "result"}


def _dc_encode(message: Any) -> bytes:
    doc = {"op": _OPS[type(message)]}
    for field in message.__slots__:
        value = getattr(message, field)
        if value is not None and value != 0:
            doc[field] = value
    return orjson.dumps(doc)


def _dc_decode(data: bytes) -> Any:
    doc = orjson.loads(data)
    return _KINDS[doc.pop("op")](**doc)


def _per_call(fn: Callable[[], object], rounds: int) -> float:
    for _ in range(rounds // 10):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter() - start) / rounds)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100_000)
    rounds = parser.parse_args().rounds

    dc_exec = _Exec(_DICT_EXEC["requests"], poll=True)  # type: ignore[arg-type]
    dc_result = _Result(_DICT_RESULT["responses"], [1234, 5678, 910], 128)  # type: ignore[arg-type]
    descs = [("INPUT0", "FP32", [4], 16), ("INPUT1", "FP32", [4], 16)]
    item = messages.RequestItem("", 0, 0, {}, ["OUTPUT0", "OUTPUT1"], descs)
    ms_exec = messages.Exec([item], poll=True)
    outs = [("OUTPUT0", "FP32", [4], 16), ("OUTPUT1", "FP32", [4], 16)]
    ms_result = messages.Result([messages.ReplyItem(outs)], [1234, 5678, 910], 128)
    encode = messages.encode
    cases = {
        "dict+orjson": (
            lambda: orjson.loads(orjson.dumps(_DICT_EXEC)),
            lambda: orjson.loads(orjson.dumps(_DICT_RESULT)),
        ),
        "dataclass+orjson": (
            lambda: _dc_decode(_dc_encode(dc_exec)),
            lambda: _dc_decode(_dc_encode(dc_result)),
        ),
        "msgspec (ipc.messages)": (
            lambda: messages.decode_to_worker(encode(ms_exec)),
            lambda: messages.decode_to_server(encode(ms_result)),
        ),
    }
    print(f"{'codec':24} {'exec µs':>8} {'result µs':>10} {'batch µs':>9}")
    for name, (exec_fn, result_fn) in cases.items():
        e = _per_call(exec_fn, rounds)
        r = _per_call(result_fn, rounds)
        print(f"{name:24} {e:8.2f} {r:10.2f} {e + r:9.2f}")


if __name__ == "__main__":
    main()
