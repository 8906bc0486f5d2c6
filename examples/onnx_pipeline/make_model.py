"""Write the pipeline's model, ``model_repository/sentiment/1/model.onnx``, with onnx.helper.

A linear classifier over the pre-processing's features [positive words, negative words,
words] giving logits for (negative, neutral, positive): ``LOGITS = FEATURES @ W + B``.
It stands in for a trained network exported to ONNX.

    pip install onnx
    python examples/onnx_pipeline/make_model.py [REPOSITORY]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WEIGHTS = np.array(
    [
        [-1.0, 2.0, 0.0],  # negative
        [0.0, 0.0, 0.1],  # neutral: wins when neither kind of word shows up
        [2.0, -1.0, 0.0],  # positive
    ],
    dtype=np.float32,
)
BIAS = np.array([0.0, 0.5, 0.0], dtype=np.float32)


def build() -> onnx.ModelProto:
    # "batch" is a named free dimension: the server sees that the model can batch.
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["FEATURES", "W"], ["scores"]),
            helper.make_node("Add", ["scores", "B"], ["LOGITS"]),
        ],
        "sentiment",
        [helper.make_tensor_value_info("FEATURES", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("LOGITS", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(WEIGHTS.T.copy(), "W"), numpy_helper.from_array(BIAS, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    repository = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "model_repository"
    target = repository / "sentiment" / "1" / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(build(), str(target))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
