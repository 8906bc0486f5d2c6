"""Small ONNX models built at test time with ``onnx.helper`` (no downloads), and model
folders that hold them. Needs the ``onnx`` package (a test dependency).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

Shape = Sequence[int | str | None]


def _onnx() -> Any:
    import onnx

    return onnx


def graph_model(
    nodes: list[Any], inputs: list[Any], outputs: list[Any], initializers: Sequence[Any] = ()
) -> bytes:
    """Serialized model (IR 8, opset 13) of one graph."""
    onnx = _onnx()
    helper = onnx.helper
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def tensor(name: str, elem_type: int, shape: Shape) -> Any:
    return _onnx().helper.make_tensor_value_info(name, elem_type, list(shape))


def identity(elem_type: int, shape: Shape = ("N", 4), names: tuple[str, str] = ("X", "Y")) -> bytes:
    """``Y = X`` for one element type (an ``onnx.TensorProto`` number)."""
    helper = _onnx().helper
    return graph_model(
        [helper.make_node("Identity", [names[0]], [names[1]])],
        [tensor(names[0], elem_type, shape)],
        [tensor(names[1], elem_type, shape)],
    )


def add_sub(shape: Shape = ("N", 4), elem_type: int = 1) -> bytes:
    """``OUTPUT0 = INPUT0 + INPUT1``, ``OUTPUT1 = INPUT0 - INPUT1`` (Triton's add_sub)."""
    helper = _onnx().helper
    return graph_model(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        [tensor("INPUT0", elem_type, shape), tensor("INPUT1", elem_type, shape)],
        [tensor("OUTPUT0", elem_type, shape), tensor("OUTPUT1", elem_type, shape)],
    )


def accumulator() -> bytes:
    """A stateful model for sequence batching: ``OUTPUT = INPUT + STATE_IN + 100 * START``,
    ``STATE_OUT = OUTPUT`` (FP32, ``[N, 1]``): with START as the sequence's start control
    and STATE_IN/STATE_OUT as its implicit state, each answer is the running sum, plus 100
    from the first request on."""
    onnx = _onnx()
    helper = onnx.helper
    fp32 = onnx.TensorProto.FLOAT
    return graph_model(
        [
            helper.make_node("Add", ["INPUT", "STATE_IN"], ["SUM"]),
            helper.make_node("Mul", ["START", "HUNDRED"], ["BONUS"]),
            helper.make_node("Add", ["SUM", "BONUS"], ["OUTPUT"]),
            helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"]),
        ],
        [tensor(n, fp32, ("N", 1)) for n in ("INPUT", "START", "STATE_IN")],
        [tensor(n, fp32, ("N", 1)) for n in ("OUTPUT", "STATE_OUT")],
        [helper.make_tensor("HUNDRED", fp32, [1], [100.0])],
    )


def scale(factor: float, shape: Shape = ("N", 4), external_weights: bool = False) -> Any:
    """``Y = X * W`` with W a float32 initializer of ``factor``; the ``onnx.ModelProto``
    (to save with external data when ``external_weights``)."""
    onnx = _onnx()
    helper = onnx.helper
    width = int(shape[-1])  # type: ignore[arg-type]
    weight = helper.make_tensor("W", onnx.TensorProto.FLOAT, [width], [factor] * width)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "W"], ["Y"])],
        "g",
        [tensor("X", onnx.TensorProto.FLOAT, shape)],
        [tensor("Y", onnx.TensorProto.FLOAT, shape)],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def write_model(
    repository: Path,
    name: str,
    model: bytes,
    config: str | None = None,
    *,
    version: int = 1,
    filename: str = "model.onnx",
) -> Path:
    """A model folder ``repository/name`` with ``version/filename`` and, when given,
    ``config.pbtxt``; returns the folder."""
    folder = repository / name
    (folder / str(version)).mkdir(parents=True, exist_ok=True)
    (folder / str(version) / filename).write_bytes(model)
    if config is not None:
        (folder / "config.pbtxt").write_text(config)
    return folder


def write_directory_form(
    repository: Path, name: str, model: Any, config: str | None = None
) -> Path:
    """Triton's directory form: ``1/model.onnx/model.onnx`` with its weights in an
    external data file beside it."""
    onnx = _onnx()
    folder = repository / name
    inner = folder / "1" / "model.onnx"
    inner.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        model,
        str(inner / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    if config is not None:
        (folder / "config.pbtxt").write_text(config)
    return folder
