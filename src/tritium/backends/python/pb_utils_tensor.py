"""``pb_utils.Tensor``: a named numpy array, with Triton's construction rules and DLPack.

Rules kept from Triton's Python backend:

* ``Tensor(name, array)`` takes a numpy array only (``TypeError`` otherwise) and a non-empty
  name; the dtype must be one Triton knows — object and ``np.bytes_`` arrays are BYTES,
  anything else unknown (``np.str_``, complex, non-native byte order) raises
  ``TritonModelException("NumPy dtype is not supported.")``.
* A non-contiguous array is made C-contiguous; a contiguous one is kept as is, so
  ``as_numpy()`` returns the very array the model passed in.
* ``to_dlpack()`` returns a DLPack ``PyCapsule`` (what ``torch.utils.dlpack.from_dlpack``
  and ``tf.experimental.dlpack.from_dlpack`` take); the tensor itself implements
  ``__dlpack__``/``__dlpack_device__``, so ``np.from_dlpack(tensor)`` works too.
* ``Tensor.from_dlpack(name, obj)`` accepts a capsule or any object with ``__dlpack__``;
  only CPU, C-contiguous tensors are supported here.

``triton_dtype()`` returns the ``TRITONSERVER_TYPE_*`` integer. Tensors made by the worker
from shared memory go through :meth:`Tensor._from_buffer`, which wraps without copying.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tritium.backends.python.pb_utils_errors import TritonModelException
from tritium.core.datatypes import deserialize_bytes, serialize_bytes

# TRITONSERVER_DataType values, keyed by wire name.
TRITON_TYPE_BY_WIRE: dict[str, int] = {
    "INVALID": 0,
    "BOOL": 1,
    "UINT8": 2,
    "UINT16": 3,
    "UINT32": 4,
    "UINT64": 5,
    "INT8": 6,
    "INT16": 7,
    "INT32": 8,
    "INT64": 9,
    "FP16": 10,
    "FP32": 11,
    "FP64": 12,
    "BYTES": 13,
    "BF16": 14,
}

# Exact (native byte order) numpy dtypes Triton accepts, mapped to their wire name.
_WIRE_BY_DTYPE: dict[np.dtype, str] = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
    np.dtype(np.object_): "BYTES",
}

_KDLCPU = 1


def wire_name_of(dtype: np.dtype) -> str | None:
    """Wire name Triton gives a numpy dtype, or None when Triton does not support it."""
    wire = _WIRE_BY_DTYPE.get(dtype)
    if wire is None and dtype.kind == "S":
        return "BYTES"  # np.bytes_ of any item size
    return wire


class _CapsuleExporter:
    """Presents a bare DLPack capsule through ``__dlpack__`` so ``np.from_dlpack`` takes it."""

    __slots__ = ("_capsule",)

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        # numpy checks the device recorded inside the capsule itself and refuses non-CPU.
        return (_KDLCPU, 0)


def _is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


class Tensor:
    """A named tensor, as ``triton_python_backend_utils.Tensor``."""

    __slots__ = ("_name", "_array", "_datatype")

    def __init__(self, name: str, numpy_array: np.ndarray) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Tensor name must be a str, got {type(name)}")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if not isinstance(numpy_array, np.ndarray):
            raise TypeError(
                f"Tensor expects a numpy.ndarray, got {type(numpy_array)}; "
                "convert it with numpy.asarray() first"
            )
        wire = wire_name_of(numpy_array.dtype)
        if wire is None:
            raise TritonModelException("NumPy dtype is not supported.")
        if not numpy_array.flags.c_contiguous:
            numpy_array = np.ascontiguousarray(numpy_array)
        self._name = name
        self._array = numpy_array
        self._datatype = wire

    @classmethod
    def _from_buffer(
        cls,
        name: str,
        array: np.ndarray,
        datatype: str,
        shape: tuple[int, ...] | list[int] | None = None,
    ) -> Tensor:
        """Wrap an array the worker already holds, without copying or checking it.

        ``datatype`` is the wire name ("FP32", "BYTES", "BF16"...). For fixed-size types
        ``array`` is the C-contiguous view (e.g. over shared memory) with its final shape
        and matching dtype; BF16 travels as ``uint16`` words. For BYTES, ``array`` is either
        an object array of ``bytes`` with its final shape, or the serialized ``uint8``
        buffer plus ``shape``, which is then deserialized here.
        """
        if datatype == "BYTES" and array.dtype != np.object_:
            array = deserialize_bytes(array)  # type: ignore[arg-type]  # any buffer works
            if shape is not None:
                array = array.reshape(shape)
        elif shape is not None and tuple(array.shape) != tuple(shape):
            array = array.reshape(shape)
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._array = array
        tensor._datatype = datatype
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int:
        """The ``TRITONSERVER_TYPE_*`` integer (FP32 is 11, BYTES is 13)."""
        return TRITON_TYPE_BY_WIRE[self._datatype]

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        """A DLPack capsule over this tensor's memory (shared, not copied)."""
        return self.__dlpack__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        if self._datatype == "BYTES":
            raise TritonModelException("DLPack does not have support for string tensors.")
        try:
            return self._array.__dlpack__(**kwargs)
        except BufferError:
            # Unversioned DLPack cannot flag read-only memory; hand out a private copy.
            if self._array.flags.writeable:
                raise
            return np.array(self._array, copy=True).__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDLCPU, 0)

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor: Any) -> Tensor:
        """A tensor sharing memory with a DLPack capsule or an object with ``__dlpack__``."""
        if not isinstance(name, str):
            raise TypeError(f"Tensor name must be a str, got {type(name)}")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if isinstance(dlpack_tensor, Tensor) and dlpack_tensor._wire_dtype() == "BF16":
            # numpy has no bfloat16: keep the 2-byte words and the type when the source
            # is one of our own BF16 tensors.
            return Tensor._from_buffer(name, dlpack_tensor._raw_array(), "BF16")
        if _is_capsule(dlpack_tensor):
            source: Any = _CapsuleExporter(dlpack_tensor)
        elif hasattr(dlpack_tensor, "__dlpack__"):
            source = dlpack_tensor
        else:
            raise TritonModelException(
                "Provided tensor is not supported. Tensor must be a DLPack capsule "
                "or have `__dlpack__` and `__dlpack_device__` attributes"
            )
        try:
            array = np.from_dlpack(source)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise TritonModelException(
                f"Cannot use this DLPack tensor (only CPU tensors of Triton data types "
                f"are supported): {exc}"
            ) from None
        if not array.flags.c_contiguous:
            raise TritonModelException(
                "DLPack tensor is not contiguous. Only contiguous DLPack tensors that "
                "are stored in C-Order are supported."
            )
        wire = wire_name_of(array.dtype)
        if wire is None or wire == "BYTES":
            raise TritonModelException(f"DLPack data type {array.dtype} is not supported.")
        return Tensor._from_buffer(name, array, wire)

    def _wire_dtype(self) -> str:
        """Wire name of the data type ("FP32", "BYTES", "BF16"...)."""
        return self._datatype

    def _raw_array(self) -> np.ndarray:
        """The stored array; for BF16 these are the raw ``uint16`` words."""
        return self._array

    def _serialized(self) -> bytes:
        """BYTES payload in Triton's wire form (4-byte little-endian length, then data)."""
        return serialize_bytes(self._array)

    def __repr__(self) -> str:
        return f"Tensor(name={self._name!r}, datatype={self._datatype}, shape={self.shape()})"
