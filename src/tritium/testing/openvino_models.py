"""Small OpenVINO IR models for tests, converted at test time from the ONNX models of
:mod:`tritium.testing.onnx_models` (no downloads).

OpenVINO reads the ONNX file with its own front end and ``serialize`` writes the IR: not
``convert_model``/``save_model``, which start telemetry processes that post to the
network (and hang where there is none).
"""

from __future__ import annotations

import tempfile
from pathlib import Path


def write_openvino_model(
    repository: Path, name: str, onnx_model: bytes, config: str | None = None, version: str = "1"
) -> Path:
    """A model folder ``repository/name`` with ``version/model.xml`` + ``model.bin``
    converted from ``onnx_model`` (weights kept in their precision) and, when given,
    ``config.pbtxt``; returns the folder."""
    import openvino as ov

    folder = repository / name
    (folder / version).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "model.onnx"
        source.write_bytes(onnx_model)
        model = ov.Core().read_model(str(source))
    # Weights are kept in their precision (save_model would compress them to fp16).
    ov.serialize(model, str(folder / version / "model.xml"), str(folder / version / "model.bin"))
    if config is not None:
        (folder / "config.pbtxt").write_text(config)
    return folder
