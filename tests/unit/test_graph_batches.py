"""A graph model's batch run straight from the exec message's items (graph_batches) gives
what the general path (pb_utils requests and responses) gives: the same outputs in the
same arena places, requested outputs only, reshape, errors per request; batches it does
not take fall back to the general path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tritium.backends import graph_batches  # noqa: E402
from tritium.backends.python.model_host import ModelHost  # noqa: E402
from tritium.config import config_to_json  # noqa: E402
from tritium.config.loader import load_config_file  # noqa: E402
from tritium.core.datatypes import RAW_DTYPES  # noqa: E402
from tritium.ipc.arena import ALIGN_MASK, Arena  # noqa: E402
from tritium.ipc.messages import Init, Load, ReplyItem, RequestItem  # noqa: E402
from tritium.testing import onnx_models as om  # noqa: E402

T = onnx.TensorProto


def _align(n: int) -> int:
    return (n + ALIGN_MASK) & ~ALIGN_MASK


class Host:
    """A model host over a written ONNX model, with its two arenas."""

    def __init__(self, tmp_path: Path, model: bytes, config: str | None = None) -> None:
        folder = om.write_model(tmp_path, "m", model, config)
        written = {} if config is None else config_to_json(load_config_file(folder, "m"))
        self.host = ModelHost(Load("m", "1", str(folder), written, auto_complete=True))
        completed = self.host.load()
        assert completed is not None
        self.host.initialize(Init(completed, "m_0"))
        self.inputs = Arena.create(1 << 20)
        self.outputs = Arena.create(1 << 20)

    def close(self) -> None:
        self.inputs.close()
        self.outputs.close()

    def run(
        self, requests: list[dict[str, np.ndarray]], wanted: list[str] | None = None
    ) -> tuple[list[dict[str, np.ndarray] | tuple[str, str]], str]:
        """Each request's outputs (or error), and which path ran the batch."""
        buf = self.inputs.buf
        items: list[RequestItem | int] = []
        pos = _align(len(requests))
        buf[: len(requests)] = bytes(len(requests))
        last = None
        for arrays in requests:
            descs = []
            for name, array in arrays.items():
                raw = np.ascontiguousarray(array).tobytes()
                buf[pos : pos + len(raw)] = raw
                descs.append((name, wire_of(array), list(array.shape), len(raw)))
                pos = _align(pos + len(raw))
            item = RequestItem("", 0, 0, {}, wanted, descs)
            items.append(0 if item == last else item)
            last = item
        fed = graph_batches.batch_feeds(self.host.model, items, self.inputs)
        result = self.host.execute(items, self.inputs, self.outputs)
        answers: list[dict[str, np.ndarray] | tuple[str, str]] = []
        reply: ReplyItem | None = None
        off = 0
        for entry in result.responses:
            reply = reply if entry == 0 else entry  # type: ignore[assignment]
            assert reply is not None
            if reply.error is not None:
                answers.append(reply.error)
                continue
            got = {}
            for name, wire, shape, nbytes in reply.outputs or ():
                got[name] = np.ndarray(shape, RAW_DTYPES[wire], self.outputs.buf, off).copy()
                off = _align(off + nbytes)
            answers.append(got)
        return answers, "items" if fed is not None else "general"


def wire_of(array: np.ndarray) -> str:
    return {np.float32: "FP32", np.int32: "INT32", np.float16: "FP16"}[array.dtype.type]


def random_pairs(seed: int, count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {"INPUT0": rng.random((1, 4), np.float32), "INPUT1": rng.random((1, 4), np.float32)}
        for _ in range(count)
    ]


@pytest.fixture
def add_sub(tmp_path: Path):
    host = Host(tmp_path, om.add_sub())
    yield host
    host.close()


def test_a_batch_of_like_requests_runs_from_the_items(add_sub: Host) -> None:
    requests = random_pairs(1, 5)
    answers, path = add_sub.run(requests)
    assert path == "items"
    for request, answer in zip(requests, answers):
        assert isinstance(answer, dict)
        np.testing.assert_array_equal(answer["OUTPUT0"], request["INPUT0"] + request["INPUT1"])
        np.testing.assert_array_equal(answer["OUTPUT1"], request["INPUT0"] - request["INPUT1"])


def test_only_the_requested_outputs_are_placed(add_sub: Host) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    answers, path = add_sub.run([{"INPUT0": x, "INPUT1": x}] * 3, wanted=["OUTPUT1"])
    assert path == "items"
    for answer in answers:
        assert isinstance(answer, dict) and list(answer) == ["OUTPUT1"]
        np.testing.assert_array_equal(answer["OUTPUT1"], np.zeros((2, 4), np.float32))


def test_one_aligned_input_is_read_as_one_block(tmp_path: Path) -> None:
    # 16 float32 = 64 bytes: the requests' copies lie back to back, read in place.
    host = Host(tmp_path, om.identity(T.FLOAT, ("N", 16)))
    try:
        requests = [{"X": np.full((1, 16), i, np.float32)} for i in range(4)]
        answers, path = host.run(requests)
        assert path == "items"
        assert [a["Y"][0, 0] for a in answers] == [0, 1, 2, 3]  # type: ignore[index]
        item = RequestItem("", 0, 0, {}, None, [("X", "FP32", [1, 16], 64)])
        fed = graph_batches.batch_feeds(host.host.model, [item, 0, 0, 0], host.inputs)
        assert fed is not None
        block = fed[0]["X"]
        assert block.shape == (4, 16) and not block.flags.owndata  # a view of the arena
    finally:
        host.close()


def test_unaligned_and_multirow_inputs_are_gathered(tmp_path: Path) -> None:
    host = Host(tmp_path, om.identity(T.INT32, ("N", 3)))
    try:
        requests = [{"X": np.arange(6, dtype=np.int32).reshape(2, 3) + 10 * i} for i in range(3)]
        answers, path = host.run(requests)
        assert path == "items"
        for request, answer in zip(requests, answers):
            np.testing.assert_array_equal(answer["Y"], request["X"])  # type: ignore[index]
    finally:
        host.close()


def test_reshape_applies_both_ways(tmp_path: Path) -> None:
    config = """
name: "m"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape: { shape: [ 4 ] } } ]
"""
    host = Host(tmp_path, om.identity(T.FLOAT, ("N", 4)), config)
    try:
        requests = [{"X": np.arange(4, dtype=np.float32).reshape(1, 2, 2) * i} for i in range(3)]
        answers, path = host.run(requests)
        assert path == "items"
        for request, answer in zip(requests, answers):
            assert answer["Y"].shape == (1, 2, 2)  # type: ignore[index]
            np.testing.assert_array_equal(answer["Y"], request["X"])  # type: ignore[index]
    finally:
        host.close()


def test_a_failed_run_is_an_error_for_every_request(tmp_path: Path) -> None:
    host = Host(tmp_path, om.add_sub(("N", "D")))
    try:
        three, four = np.zeros((1, 3), np.float32), np.zeros((1, 4), np.float32)
        answers, path = host.run([{"INPUT0": three, "INPUT1": four}] * 2)  # cannot broadcast
        assert path == "items"
        for answer in answers:
            assert isinstance(answer, tuple) and answer[1].startswith("onnxruntime: ")
        answers, _ = host.run([{"INPUT0": four, "INPUT1": four}] * 2)
        assert all(isinstance(answer, dict) for answer in answers)  # the instance serves on
    finally:
        host.close()


def test_requests_that_differ_take_the_general_path(add_sub: Host) -> None:
    one = np.ones((1, 4), np.float32)
    two = np.ones((2, 4), np.float32)
    answers, path = add_sub.run([{"INPUT0": one, "INPUT1": one}, {"INPUT0": two, "INPUT1": two}])
    assert path == "general"
    assert answers[0]["OUTPUT0"].shape == (1, 4)  # type: ignore[index]
    np.testing.assert_array_equal(answers[1]["OUTPUT0"], 2 * two)  # type: ignore[index]


def test_the_general_path_answers_the_same(add_sub: Host) -> None:
    requests = random_pairs(2, 4)
    fast, path = add_sub.run(requests)
    assert path == "items"
    add_sub.host._graph = False
    general, _ = add_sub.run(requests)
    for a, b in zip(fast, general):
        assert a.keys() == b.keys()  # type: ignore[union-attr]
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])  # type: ignore[index]
