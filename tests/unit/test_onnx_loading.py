"""Loading an ONNX model in a worker: telling it from a Python model, the file forms,
auto-complete from the graph and the backend settings (onnxruntime, small models built
here)."""

from __future__ import annotations

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tritium.backends.onnxruntime import loading  # noqa: E402
from tritium.backends.onnxruntime.session import OnnxLoadError  # noqa: E402
from tritium.testing import onnx_models as om  # noqa: E402


def load(folder: Path, config: dict | None = None, *, auto_complete: bool = True, entries=()):
    return loading.load(
        folder.name,
        "1",
        config or {},
        folder / "1",
        auto_complete=auto_complete,
        backend_config=entries,
    )


def test_serves_onnx_folders_and_leaves_python_ones(tmp_path: Path) -> None:
    folder = om.write_model(tmp_path, "m", om.add_sub())
    assert loading.serves({}, folder / "1")
    (folder / "1" / "model.py").write_text("")
    assert loading.serves({}, folder / "1")  # Triton looks for model.onnx first
    assert not loading.serves({"backend": "python"}, folder / "1")
    assert loading.serves({"platform": "onnxruntime_onnx"}, tmp_path / "missing")


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([], 4),
        ([["onnxruntime", "default-max-batch-size", "16"]], 16),
        ([["", "default-max-batch-size", "2"]], 2),
        ([["", "default-max-batch-size", "2"], ["onnxruntime", "default-max-batch-size", "8"]], 8),
        ([["python", "default-max-batch-size", "2"]], 4),
    ],
)
def test_default_max_batch_size_setting(tmp_path: Path, entries, expected: int) -> None:
    folder = om.write_model(tmp_path, "m", om.add_sub())
    _, config = load(folder, entries=entries)
    assert config["max_batch_size"] == expected


def test_bad_default_max_batch_size_is_named(tmp_path: Path) -> None:
    folder = om.write_model(tmp_path, "m", om.add_sub())
    with pytest.raises(OnnxLoadError, match="default-max-batch-size must be an integer"):
        load(folder, entries=[["onnxruntime", "default-max-batch-size", "x"]])


def test_directory_form_and_named_file(tmp_path: Path) -> None:
    folder = om.write_directory_form(tmp_path, "d", om.scale(2.0))
    factory, config = load(folder)
    assert [i["name"] for i in config["input"]] == ["X"]
    assert factory().path == folder / "1" / "model.onnx" / "model.onnx"
    named = om.write_model(tmp_path, "n", om.add_sub(), filename="net.onnx")
    _, config = load(named, {"default_model_filename": "net.onnx"})
    assert config["backend"] == "onnxruntime"


def test_missing_file_is_named_without_paths(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    with pytest.raises(OnnxLoadError) as info:
        load(tmp_path / "m", {"platform": "onnxruntime_onnx"})
    assert str(info.value) == "unable to find 'model.onnx' in version 1 of model 'm'"


def test_without_auto_complete_only_backend_fields_are_filled(tmp_path: Path) -> None:
    folder = om.write_model(tmp_path, "m", om.add_sub())
    _, config = load(folder, auto_complete=False)
    assert (config["backend"], config["platform"]) == ("onnxruntime", "onnxruntime_onnx")
    assert config["input"] == [] and config["max_batch_size"] == 0


def test_a_broken_file_fails_with_onnxruntime_reason(tmp_path: Path) -> None:
    folder = om.write_model(tmp_path, "m", b"not an onnx model")
    with pytest.raises(OnnxLoadError) as info:
        load(folder)
    assert str(info.value).startswith("onnxruntime could not open the model: ")
    assert str(tmp_path) not in str(info.value)


def test_decoupled_onnx_models_are_refused(tmp_path: Path) -> None:
    folder = om.write_model(tmp_path, "m", om.add_sub())
    config = {"model_transaction_policy": {"decoupled": True}}
    with pytest.raises(OnnxLoadError, match="does not serve decoupled models"):
        load(folder, config)
