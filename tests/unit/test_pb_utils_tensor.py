"""pb_utils.Tensor: construction rules, every data type, BYTES, DLPack — as Triton's Python backend."""

from __future__ import annotations

import numpy as np
import pytest

from tritium.backends.python import pb_utils
from tritium.backends.python.pb_utils import Tensor, TritonModelException

# numpy dtype -> TRITONSERVER_TYPE_* integer (Triton's tritonserver.h values)
FIXED_TYPES = [
    (np.bool_, 1, "BOOL"),
    (np.uint8, 2, "UINT8"),
    (np.uint16, 3, "UINT16"),
    (np.uint32, 4, "UINT32"),
    (np.uint64, 5, "UINT64"),
    (np.int8, 6, "INT8"),
    (np.int16, 7, "INT16"),
    (np.int32, 8, "INT32"),
    (np.int64, 9, "INT64"),
    (np.float16, 10, "FP16"),
    (np.float32, 11, "FP32"),
    (np.float64, 12, "FP64"),
]


@pytest.mark.parametrize(("np_type", "code", "wire"), FIXED_TYPES)
def test_fixed_size_round_trip(np_type, code, wire):
    array = (np.arange(6) % 2 == 0) if np_type is np.bool_ else np.arange(6).astype(np_type)
    array = array.reshape(2, 3)
    t = Tensor("x", array)
    assert t.name() == "x"
    assert t.triton_dtype() == code
    assert type(t.triton_dtype()) is int
    assert t.shape() == [2, 3]
    assert isinstance(t.shape(), list)
    assert t.is_cpu() is True
    assert t._wire_dtype() == wire
    # Triton keeps the caller's (contiguous) array: as_numpy() is that very object.
    assert t.as_numpy() is array


def test_fp16_values_survive():
    array = np.array([0.5, -1.25, 65504.0], dtype=np.float16)
    out = Tensor("h", array).as_numpy()
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, array)


def test_object_array_is_bytes():
    array = np.array([b"ab", "c\u00e9", 1], dtype=np.object_)
    t = Tensor("s", array)
    assert t.triton_dtype() == 13
    assert t._wire_dtype() == "BYTES"
    assert t.as_numpy() is array
    # str elements are UTF-8 encoded and other objects str()-ed when serialized.
    assert t._serialized() == b"\x02\x00\x00\x00ab\x03\x00\x00\x00c\xc3\xa9\x01\x00\x00\x001"


def test_numpy_bytes_array_is_bytes():
    array = np.array([b"a", b"bb"], dtype=np.bytes_)
    t = Tensor("s", array)
    assert t.triton_dtype() == 13
    assert t._serialized() == b"\x01\x00\x00\x00a\x02\x00\x00\x00bb"


def test_non_contiguous_array_is_made_contiguous():
    base = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = Tensor("x", base.T)
    assert t.as_numpy().flags.c_contiguous
    assert t.shape() == [4, 3]
    np.testing.assert_array_equal(t.as_numpy(), base.T)


def test_zero_dim_array():
    t = Tensor("x", np.array(3.0, dtype=np.float32))
    assert t.shape() == []
    assert t.as_numpy().shape == ()


@pytest.mark.parametrize(
    "array",
    [
        np.array(["a", "b"]),  # np.str_: Triton rejects it
        np.ones(2, dtype=np.complex64),
        np.ones(2, dtype=">f4"),  # non-native byte order
        np.array(["2020-01-01"], dtype="datetime64[D]"),
    ],
)
def test_unsupported_dtypes_raise_like_triton(array):
    with pytest.raises(TritonModelException, match="NumPy dtype is not supported."):
        Tensor("x", array)


def test_only_numpy_arrays_accepted():
    with pytest.raises(TypeError):
        Tensor("x", [1, 2, 3])


def test_empty_name_rejected():
    with pytest.raises(TritonModelException, match="Tensor name cannot be an empty string."):
        Tensor("", np.zeros(2))


def test_from_buffer_wraps_without_copy():
    buf = bytearray(16)
    view = np.ndarray((2, 2), dtype="<f4", buffer=buf)
    t = Tensor._from_buffer("in", view, "FP32")
    assert t.as_numpy() is view
    view[0, 0] = 7.0
    assert t.as_numpy()[0, 0] == 7.0
    assert t.triton_dtype() == 11


def test_from_buffer_bytes_object_array():
    array = np.array([[b"x", b"yz"]], dtype=np.object_)
    t = Tensor._from_buffer("in", array, "BYTES")
    assert t.as_numpy() is array
    assert t.triton_dtype() == 13


def test_from_buffer_bytes_serialized_buffer_is_decoded():
    raw = np.frombuffer(b"\x01\x00\x00\x00x\x02\x00\x00\x00yz", dtype=np.uint8)
    t = Tensor._from_buffer("in", raw, "BYTES", shape=[1, 2])
    out = t.as_numpy()
    assert out.dtype == np.object_
    assert out.shape == (1, 2)
    assert out.tolist() == [[b"x", b"yz"]]
    assert all(type(v) is bytes for v in out.flat)


def test_from_buffer_bf16_keeps_raw_words():
    words = np.array([0x3F80, 0x4000], dtype=np.uint16)  # 1.0, 2.0 in bfloat16
    t = Tensor._from_buffer("b", words, "BF16")
    assert t.triton_dtype() == 14
    assert t._raw_array() is words


def test_to_dlpack_returns_a_capsule_sharing_memory():
    array = np.arange(4, dtype=np.float32)
    capsule = Tensor("x", array).to_dlpack()
    assert type(capsule).__name__ == "PyCapsule"
    back = Tensor.from_dlpack("y", capsule)
    assert back.name() == "y"
    assert back.triton_dtype() == 11
    array[0] = 42.0
    assert back.as_numpy()[0] == 42.0  # same memory, no copy


@pytest.mark.parametrize(("np_type", "code", "wire"), FIXED_TYPES)
def test_dlpack_round_trip_every_type(np_type, code, wire):
    array = (np.arange(6) % 3 == 0) if np_type is np.bool_ else np.arange(6).astype(np_type)
    back = Tensor.from_dlpack("y", Tensor("x", array.reshape(3, 2)).to_dlpack())
    assert back.triton_dtype() == code
    assert back.shape() == [3, 2]
    np.testing.assert_array_equal(back.as_numpy(), array.reshape(3, 2))


def test_numpy_can_consume_a_tensor_directly():
    t = Tensor("x", np.arange(3, dtype=np.int64))
    assert t.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(t), [0, 1, 2])


def test_from_dlpack_accepts_objects_with_dunder_dlpack():
    t = Tensor.from_dlpack("y", np.arange(5, dtype=np.int16))
    assert t.triton_dtype() == 7
    assert t.as_numpy().tolist() == [0, 1, 2, 3, 4]


def test_read_only_array_still_exports():
    array = np.arange(3, dtype=np.float64)
    array.flags.writeable = False
    back = Tensor.from_dlpack("y", Tensor("x", array).to_dlpack())
    np.testing.assert_array_equal(back.as_numpy(), array)


def test_bytes_tensor_has_no_dlpack():
    t = Tensor("s", np.array([b"a"], dtype=np.object_))
    with pytest.raises(
        TritonModelException, match="DLPack does not have support for string tensors."
    ):
        t.to_dlpack()


def test_from_dlpack_rejects_other_objects():
    with pytest.raises(TritonModelException, match="Provided tensor is not supported"):
        Tensor.from_dlpack("y", [1, 2])


def test_from_dlpack_rejects_empty_name():
    with pytest.raises(TritonModelException, match="Tensor name cannot be an empty string."):
        Tensor.from_dlpack("", np.arange(3))


def test_from_dlpack_rejects_non_contiguous():
    strided = np.arange(10, dtype=np.float32)[::2]
    with pytest.raises(TritonModelException, match="not contiguous"):
        Tensor.from_dlpack("y", strided)


def test_consumed_capsule_is_refused():
    capsule = Tensor("x", np.arange(3.0)).to_dlpack()
    Tensor.from_dlpack("a", capsule)
    with pytest.raises(TritonModelException):
        Tensor.from_dlpack("b", capsule)


def test_pb_utils_exports_tensor():
    assert pb_utils.Tensor is Tensor
