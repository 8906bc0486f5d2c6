"""Tensor data in JSON: the ``data`` field of an input to numpy, and numpy to ``data``.

Input rules follow Triton's HTTP endpoint: ``data`` may be flat or nested (nesting
is flattened in row-major order); BOOL takes only true/false, integer types only
integers (wrapping to the type's width as Triton does), FP32/FP64 integers or floats,
BYTES strings (sent UTF-8 encoded); FP16 and BF16 are binary-only. Element types are
checked in one pass over the flat list before anything is converted.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from itertools import chain

import numpy as np
import orjson

from tritium.core import datatypes
from tritium.core.errors import InvalidArgument

_SIGNED = {"INT8", "INT16", "INT32", "INT64"}
_UNSIGNED = {"UINT8", "UINT16", "UINT32", "UINT64"}
_FLOATS = {"FP32", "FP64"}
_INT_ONLY = frozenset({int})
_NUMBER = frozenset({int, float})
_BOOL_ONLY = frozenset({bool})
_STR_ONLY = frozenset({str})
_F32 = np.dtype(np.float32)
#: JSON string data of at least this many elements is kept serialized (PackedBytes).
PACKED_JSON_STRINGS = 64 * 1024

# Triton's JSON reader wording for a value of the wrong kind.
_KIND_ERROR = {
    "BOOL": "attempt to access JSON non-boolean as boolean",
    "signed": "attempt to access JSON non-signed-integer as signed-integer",
    "unsigned": "attempt to access JSON non-unsigned-integer as unsigned-integer",
    "float": "attempt to access JSON non-number as double",
}


def flatten(data: list) -> tuple[list, frozenset[type]]:
    """Row-major flattening of arbitrarily nested lists (iterative: no recursion).

    Returns the flat list and the set of its element types.
    """
    while True:
        types = frozenset(map(type, data))
        if list not in types:
            return data, types
        data = list(chain.from_iterable(x if type(x) is list else (x,) for x in data))


def _bad_kind(name: str, kind: str) -> InvalidArgument:
    return InvalidArgument(f"Unable to parse 'data': {_KIND_ERROR[kind]} for input '{name}'")


def _count_error(name: str, model: str, datatype: str, count: int, got: int) -> InvalidArgument:
    if datatype == "BYTES":  # Triton's wording for strings
        if got > count:
            return InvalidArgument(
                f"unexpected number of string elements {got} for inference input "
                f"'{name}' for model '{model}', expecting {count}"
            )
        return InvalidArgument(
            f"expected {count} string elements for inference input '{name}' for model "
            f"'{model}', got {got}"
        )
    return InvalidArgument(
        "Unable to parse 'data': Shape does not match true shape of 'data' field "
        f"for input '{name}' (expected {count} elements, got {got})"
    )


def _as_float(flat: list, datatype: str, name: str) -> np.ndarray:
    try:
        if datatype == "FP32":
            # array('f') saturates out-of-range values to +-inf (Triton's double->float
            # cast does the same) without numpy's overflow warning.
            return np.frombuffer(array("f", flat), dtype=np.float32)
        return np.array(flat, dtype=np.float64)
    except OverflowError:  # an integer beyond the double range
        raise _bad_kind(name, "float") from None


def decode_json_data(
    name: str, model: str, datatype: str, shape: tuple[int, ...], count: int, data: object
) -> np.ndarray:
    """Convert an input's JSON ``data`` to an array of ``shape`` (``count`` elements)."""
    if datatype == "FP16" or datatype == "BF16":
        raise InvalidArgument(
            f"receiving {datatype} data via JSON is not supported. Please use the "
            f"binary data format for input {name}"
        )
    if type(data) is not list:
        raise InvalidArgument(
            f"Unable to parse 'data': attempt to access JSON non-array as array for input '{name}'"
        )
    if datatype == "FP32" and count:
        # The usual case, a flat list of numbers: array('f') refuses nested lists and
        # non-numbers itself (the general path below then words the error), but takes
        # booleans, which Triton refuses.
        try:
            values = array("f", data)
        except (TypeError, OverflowError):
            values = None
        if values is not None and len(values) == count and bool not in set(map(type, data)):
            return np.ndarray(shape, _F32, values)
    flat, types = flatten(data)
    if len(flat) != count:
        raise _count_error(name, model, datatype, count, len(flat))
    if count == 0:
        return np.empty(shape, dtype=datatypes.numpy_dtype(datatype))
    if datatype == "FP32" or datatype == "FP64":
        if not types <= _NUMBER:
            raise _bad_kind(name, "float")
        out = _as_float(flat, datatype, name)
    elif datatype in _SIGNED or datatype in _UNSIGNED:
        signed = datatype in _SIGNED
        if not types <= _INT_ONLY:
            raise _bad_kind(name, "signed" if signed else "unsigned")
        try:
            out = np.array(flat, dtype=np.int64 if signed else np.uint64)
        except OverflowError:
            raise _bad_kind(name, "signed" if signed else "unsigned") from None
        if datatype != "INT64" and datatype != "UINT64":
            # Narrower types wrap like Triton's C casts (INT8 300 -> 44).
            out = out.astype(datatypes.numpy_dtype(datatype))
    elif datatype == "BOOL":
        if not types <= _BOOL_ONLY:
            raise _bad_kind(name, "BOOL")
        out = np.array(flat, dtype=np.bool_)
    elif datatype == "BYTES":
        if not types <= _STR_ONLY:
            raise InvalidArgument(
                "Unable to parse JSON bytes array: attempt to access JSON non-string as "
                f"string for input '{name}'"
            )
        out = np.empty(count, dtype=np.object_)
        out[:] = [s.encode("utf-8") for s in flat]
        if count >= PACKED_JSON_STRINGS:
            # Serialized here (off the event loop for a big body, see ``handlers``), a
            # slice per call so the loop's thread gets the GIL between them, and kept so:
            # the worker's arena takes it in one copy.
            raw = b"".join(
                [
                    datatypes.serialize_bytes(out[start : start + PACKED_JSON_STRINGS])
                    for start in range(0, count, PACKED_JSON_STRINGS)
                ]
            )
            packed = datatypes.PackedBytes(raw, (count,))
            # PackedBytes stands in for the BYTES array (see ``datatypes.PackedBytes``).
            return packed if len(shape) == 1 else packed.reshape(shape)  # type: ignore[return-value]
    else:
        raise InvalidArgument(f"invalid datatype for input {name}")
    return out if len(shape) == 1 else out.reshape(shape)


class _WrongKind(Exception):
    """A slice holds a value its datatype refuses (worded once the count is known)."""


def _slice_floats(values: list, dtype: np.dtype) -> np.ndarray:
    if not frozenset(map(type, values)) <= _NUMBER:
        raise _WrongKind
    try:
        if dtype == _F32:
            return np.frombuffer(array("f", values), dtype=np.float32)
        return np.array(values, dtype=np.float64)
    except OverflowError:
        raise _WrongKind from None


def _slice_ints(values: list, dtype: np.dtype) -> np.ndarray:
    if not frozenset(map(type, values)) <= _INT_ONLY:
        raise _WrongKind
    try:
        wide = np.array(values, dtype=np.int64 if dtype.kind == "i" else np.uint64)
    except OverflowError:
        raise _WrongKind from None
    return wide if wide.dtype == dtype else wide.astype(dtype)


def _slice_bools(values: list, dtype: np.dtype) -> np.ndarray:
    if not frozenset(map(type, values)) <= _BOOL_ONLY:
        raise _WrongKind
    return np.array(values, dtype=np.bool_)


_SLICE_CONVERTERS = {
    "FP32": _slice_floats,
    "FP64": _slice_floats,
    "BOOL": _slice_bools,
    **{t: _slice_ints for t in _SIGNED | _UNSIGNED},
}


def decode_json_slices(
    name: str,
    model: str,
    datatype: str,
    shape: tuple[int, ...],
    count: int,
    slices: Iterable[list],
    most: int,
) -> np.ndarray:
    """:func:`decode_json_data` for ``data`` given as consecutive flat lists of at most
    ``most`` elements in all (the rest of its text bounds that): each list is converted
    into a preallocated array as it comes, so only one list of Python objects is alive
    at a time. Results and errors are exactly :func:`decode_json_data`'s; every slice is
    consumed, since the element count decides which error comes first.
    """
    if datatype == "FP16" or datatype == "BF16":
        raise InvalidArgument(
            f"receiving {datatype} data via JSON is not supported. Please use the "
            f"binary data format for input {name}"
        )
    if datatype == "BYTES":
        return _bytes_slices(name, model, shape, count, slices)
    convert = _SLICE_CONVERTERS.get(datatype)
    dtype = datatypes.numpy_dtype(datatype)
    # A shape larger than the text could hold is a count error: allocate nothing for it.
    out = np.empty(count, dtype=dtype) if convert is not None and count <= most else None
    got = 0
    wrong = convert is None
    for values in slices:
        n = len(values)
        if not wrong and out is not None and got + n <= count:
            try:
                out[got : got + n] = convert(values, dtype)  # type: ignore[misc]  # set unless wrong
            except _WrongKind:
                wrong = True
        got += n
    if got != count:
        raise _count_error(name, model, datatype, count, got)
    if count == 0:
        return np.empty(shape, dtype=dtype)
    if wrong:
        if datatype == "BYTES":  # the text held no strings
            raise InvalidArgument(
                "Unable to parse JSON bytes array: attempt to access JSON non-string as "
                f"string for input '{name}'"
            )
        if datatype in _FLOATS:
            raise _bad_kind(name, "float")
        if datatype == "BOOL":
            raise _bad_kind(name, "BOOL")
        raise _bad_kind(name, "signed" if datatype in _SIGNED else "unsigned")
    assert out is not None
    return out if len(shape) == 1 else out.reshape(shape)


def _bytes_slices(
    name: str, model: str, shape: tuple[int, ...], count: int, slices: Iterable[list]
) -> np.ndarray:
    """:func:`decode_json_slices` of BYTES: each slice's strings serialized as they come,
    the tensor kept serialized (PackedBytes)."""
    pieces: list[bytes] = []
    got = 0
    wrong = False
    for values in slices:
        got += len(values)
        if wrong or got > count:
            continue  # every slice is still read: the count decides the error
        if not frozenset(map(type, values)) <= _STR_ONLY:
            wrong = True
            continue
        items = np.empty(len(values), dtype=np.object_)
        items[:] = [s.encode("utf-8") for s in values]
        pieces.append(datatypes.serialize_bytes(items))
    if got != count:
        raise _count_error(name, model, "BYTES", count, got)
    if count == 0:
        return np.empty(shape, dtype=np.object_)
    if wrong:
        raise InvalidArgument(
            "Unable to parse JSON bytes array: attempt to access JSON non-string as "
            f"string for input '{name}'"
        )
    packed = datatypes.PackedBytes(b"".join(pieces), (count,))
    return packed if len(shape) == 1 else packed.reshape(shape)  # type: ignore[return-value]


def _to_text(item: object) -> str:
    if isinstance(item, bytes):
        try:
            return item.decode("utf-8")
        except UnicodeDecodeError:
            # JSON text must be valid UTF-8; binary output keeps the exact bytes.
            return item.decode("utf-8", "replace")
    if isinstance(item, str):
        return item
    return str(item)


#: Up to this many elements an FP32 output is written from a list of floats.
_SMALL = 64


def encode_json_data(
    name: str, datatype: str, array: np.ndarray
) -> np.ndarray | list[str] | list[float]:
    """The JSON ``data`` of an output: a flat numpy array or list orjson can write (a
    list of str for BYTES). orjson writes NaN and infinities as ``null``; see
    :func:`nonfinite_json` for Triton's spelling of them.
    """
    if datatype == "BYTES":
        return [_to_text(x) for x in array.reshape(-1).tolist()]
    if datatype == "FP16" or datatype == "BF16":
        raise InvalidArgument(
            f"sending {datatype} data via JSON is not supported. Please use the binary "
            "data format for output"
        )
    if datatype == "FP32":
        # Written as the double of each float, digit for digit what Triton writes
        # (0.1f -> 0.10000000149011612). Python floats are those doubles; for small
        # tensors a list of them is quicker to make than a float64 copy.
        flat = np.asarray(array, dtype=np.float32).reshape(-1)
        return flat.tolist() if flat.size <= _SMALL else flat.astype(np.float64)
    return np.ascontiguousarray(array, dtype=datatypes.numpy_dtype(datatype)).reshape(-1)


def nonfinite_json(flat: np.ndarray | list[float]) -> bytes | None:
    """JSON array text of a float array holding NaN or infinities, spelled as Triton
    (RapidJSON) writes them: ``NaN``, ``Infinity``, ``-Infinity``; None when all finite.
    """
    flat = np.asarray(flat, dtype=np.float64)
    finite = np.isfinite(flat)
    if finite.all():
        return None
    tokens = orjson.dumps(np.where(finite, flat, 0), option=orjson.OPT_SERIALIZE_NUMPY)
    parts = tokens[1:-1].split(b",")
    for i in np.flatnonzero(~finite).tolist():
        v = flat[i]
        parts[i] = b"NaN" if v != v else (b"Infinity" if v > 0 else b"-Infinity")
    return b"[" + b",".join(parts) + b"]"


#: Outputs of at least this many elements are written as JSON a slice at a time (the
#: text of a 12M-element output took one 300 ms orjson call, holding the GIL).
SLICED_OUTPUT_ELEMENTS = 256 * 1024
#: Elements written per call (about 1 ms).
OUTPUT_SLICE = 64 * 1024


def json_data_chunks(name: str, datatype: str, array: np.ndarray) -> list[bytes | memoryview]:
    """The JSON text of an output's ``data`` (a tensor of numbers or booleans), as
    :func:`encode_json_data` and :func:`nonfinite_json` write it, in chunks written a
    slice of the tensor at a time."""
    flat = array.reshape(-1)
    chunks: list[bytes | memoryview] = [b"["]
    floats = datatype in _FLOATS
    for start in range(0, flat.size, OUTPUT_SLICE):
        data = encode_json_data(name, datatype, flat[start : start + OUTPUT_SLICE])
        text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)
        if floats and b"null" in text:
            text = nonfinite_json(data) or text  # type: ignore[arg-type]  # floats: no strings
        if start:
            chunks.append(b",")
        chunks.append(memoryview(text)[1:-1])
    chunks.append(b"]")
    return chunks
