"""What the service does to a model's outputs before a frontend encodes them: Triton's output
``reshape`` and its classification extension (with ``label_filename`` labels).

Expected values are the ones Triton 2.51 answers for the same model outputs (see
tests/compat/test_outputs.py, which compares with a running Triton).
"""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core.errors import InvalidArgument, Unavailable
from tritium.core.types import InferResponse, OutputTensor
from tritium.service.model.classification import OutputClassifier, read_labels, top_k
from tritium.service.model.reshape import output_reshaper
from tritium.service.model.signature import TensorSpec, signature_from_config


def out(name: str, datatype: str, array) -> OutputTensor:
    array = np.asarray(array)
    return OutputTensor(name, datatype, tuple(array.shape), array)


def response(*outputs: OutputTensor) -> InferResponse:
    return InferResponse("m", "1", outputs=list(outputs))


# ------------------------------------------------------------------- reshape


def spec(name: str, dims: tuple[int, ...], reshape: tuple[int, ...] | None) -> TensorSpec:
    return TensorSpec(name, "FP32", dims, reshape)


BATCHED = output_reshaper(
    True,
    [
        spec("OUT", (1,), ()),
        spec("GRID", (2, 2), (4,)),
        spec("VAR", (-1, 1), (-1,)),
        spec("MIDDLE", (2, -1, 3), (2, -1, 3)),
        spec("PLAIN", (1,), None),
    ],
)


@pytest.mark.parametrize(
    "name,model_shape,client_shape",
    [
        ("OUT", (3,), (3, 1)),  # dims [1] reshape [] : [batch] -> [batch, 1]
        ("GRID", (3, 4), (3, 2, 2)),
        ("VAR", (3, 5), (3, 5, 1)),  # -1 takes the model's value
        ("MIDDLE", (1, 2, 7, 3), (1, 2, 7, 3)),
        ("OUT", (3, 1), None),  # already the config's dims: left as the model gave it
        ("PLAIN", (3, 1), None),
        ("OTHER", (3,), None),
    ],
)
def test_client_shape_of_a_batching_model(name, model_shape, client_shape):
    assert BATCHED is not None
    assert BATCHED.client_shape(name, model_shape) == client_shape


def test_client_shape_without_batching():
    reshaper = output_reshaper(False, [spec("ROWS", (3, 2), (6,)), spec("V", (-1, 2), (-1,))])
    assert reshaper is not None
    assert reshaper.client_shape("ROWS", (6,)) == (3, 2)
    assert reshaper.client_shape("V", (4,)) == (4, 2)


def test_no_reshaper_for_a_model_without_output_reshape():
    # Decided once per model: such models pay nothing per response.
    assert output_reshaper(True, [spec("A", (4,), None)]) is None
    config = {
        "name": "m",
        "max_batch_size": 4,
        "input": [{"name": "I", "data_type": "TYPE_FP32", "dims": [1], "reshape": {"shape": []}}],
        "output": [{"name": "O", "data_type": "TYPE_FP32", "dims": [1]}],
    }
    signature = signature_from_config(config)
    assert output_reshaper(True, signature.outputs.values()) is None


def test_apply_reshapes_data_as_a_view():
    assert BATCHED is not None
    data = np.arange(3, dtype=np.float32)
    resp = response(out("OUT", "FP32", data), out("PLAIN", "FP32", data.reshape(3, 1)))
    BATCHED.apply(resp)
    assert resp.outputs[0].shape == (3, 1)
    assert resp.outputs[0].data.shape == (3, 1)
    assert np.shares_memory(resp.outputs[0].data, data)
    assert resp.outputs[1].shape == (3, 1)


def test_apply_leaves_an_output_of_the_wrong_size():
    reshaper = output_reshaper(True, [spec("GRID", (2, 2), (4,))])
    assert reshaper is not None
    # A model that broke its contract: the frontend reports the mismatch, not the reshaper.
    resp = response(out("GRID", "FP32", np.zeros((1, 5), np.float32)))
    reshaper.apply(resp)
    assert resp.outputs[0].shape == (1, 5)


# ------------------------------------------------------------ classification


def test_top_k_caps_k_and_keeps_index_order_for_ties():
    shape, strings = top_k("FP32", np.array([1, 3, 3, -1e-7], np.float32), 9, batched=False)
    assert shape == [4]
    assert strings == [b"3.000000:1", b"3.000000:2", b"1.000000:0", b"-0.000000:3"]


def test_top_k_with_labels_and_batch():
    values = np.array([[1, 3, 2], [6, 5, 4]], np.int32)
    shape, strings = top_k("INT32", values, 2, batched=True, labels=[b"a", b"b"])
    assert shape == [2, 2]
    assert strings == [b"3:1:b", b"2:2", b"6:0:a", b"5:1:b"]


@pytest.mark.parametrize("datatype", ["BOOL", "BYTES", "FP16", "BF16"])
def test_top_k_refuses_what_triton_refuses(datatype):
    with pytest.raises(InvalidArgument) as info:
        top_k(datatype, np.zeros(2, np.uint8), 1, batched=False)
    assert info.value.message == (
        f"class result not available for output due to unsupported type '{datatype}'"
    )


def test_classifier_replaces_only_the_outputs_asked_for():
    classifier = OutputClassifier(True, {"S": (b"cat", b"dog", b"", b"bird")})
    scores = np.array([[0.1, 0.7, 0.2, 0.9]], np.float32)
    resp = response(out("S", "FP32", scores), out("R", "FP32", scores))
    classifier.apply(resp, {"S": 3})
    classified, raw = resp.outputs
    assert (classified.name, classified.datatype, classified.shape) == ("S", "BYTES", (1, 3))
    assert classified.data.tolist() == [[b"0.900000:3:bird", b"0.700000:1:dog", b"0.200000:2"]]
    assert raw.data is scores
    assert resp.error is None


def test_classifier_error_becomes_the_response_error():
    classifier = OutputClassifier(False, {})
    resp = response(out("B", "BOOL", np.array([True, False])))
    classifier.apply(resp, {"B": 1})
    assert isinstance(resp.error, InvalidArgument)
    assert "unsupported type 'BOOL'" in resp.error.message


def test_read_labels_one_per_line(tmp_path):
    (tmp_path / "labels.txt").write_bytes(b"cat\n\nbird\r\nfish")
    (tmp_path / "two.txt").write_bytes(b"a\nb\n\n")
    config = {
        "name": "m",
        "output": [
            {"name": "S", "label_filename": "labels.txt"},
            {"name": "T", "label_filename": "two.txt"},
            {"name": "U"},
        ],
    }
    assert read_labels(tmp_path, config) == {
        "S": (b"cat", b"", b"bird\r", b"fish"),  # as Triton's getline: only "\n" splits
        "T": (b"a", b"b", b""),  # the last newline ends a label, it does not start one
    }


def test_read_labels_missing_file_fails_the_load(tmp_path):
    config = {"name": "m", "output": [{"name": "S", "label_filename": "gone.txt"}]}
    with pytest.raises(Unavailable) as info:
        read_labels(tmp_path, config)
    # Names the file as the config does, never the server's path.
    assert info.value.message == (
        "failed to load model 'm': cannot read the label file 'gone.txt' of output 'S': "
        "No such file or directory"
    )
    assert str(tmp_path) not in info.value.message
