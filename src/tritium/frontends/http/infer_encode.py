"""Sans-IO encoding of an :class:`InferResponse` into a KServe v2 HTTP body.

The JSON header has Triton's key order (``id`` when set, ``model_name``,
``model_version``, ``parameters`` when any, ``outputs``); each output is ``name``,
``datatype``, ``shape`` then either ``data`` or ``parameters.binary_data_size``.
Binary outputs follow the header in output order; the caller then sends
``Inference-Header-Content-Length`` with the header's length.
"""

from __future__ import annotations

import secrets

import numpy as np
import orjson

from tritium.core import datatypes
from tritium.core.errors import InternalError, Unsupported
from tritium.core.types import InferResponse
from tritium.frontends.http.json_tensors import (
    SLICED_OUTPUT_ELEMENTS,
    encode_json_data,
    json_data_chunks,
    nonfinite_json,
)
from tritium.frontends.http.output_prefs import BINARY_PREF, JSON_PREF, OutputPrefs

_DUMPS_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
# Marks where prepared JSON text goes; random so output strings cannot forge it.
_MARK = secrets.token_hex(8)
# Outputs written in one piece whatever their size (strings; types JSON refuses).
_NOT_SLICED = frozenset({"BYTES", "FP16", "BF16"})


def _raw_bytes(datatype: str, array: np.ndarray) -> bytes | memoryview:
    if datatype == "BYTES":
        return datatypes.wire_bytes(array)
    if array.flags.c_contiguous and array.dtype == datatypes.raw_dtype(datatype) and array.size:
        # Already laid out as the wire wants it (the usual case): no conversion.
        return memoryview(array).cast("B")  # type: ignore[arg-type]  # arrays are buffers
    flat = np.ascontiguousarray(array, dtype=datatypes.raw_dtype(datatype)).reshape(-1)
    if flat.size == 0:
        return b""
    return memoryview(flat).cast("B")  # type: ignore[arg-type]  # arrays are buffers


def _parameters(params: dict) -> dict:
    for key, value in params.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            raise Unsupported(
                f"Response parameter '{key}' of type 'TRITONSERVER_PARAMETER_BYTES' is not "
                "currently supported"
            )
    return params


class BigJsonOutput(Exception):
    """An output is to be written as JSON text a slice at a time, which the caller
    asked to do off the event loop (``on_loop=True``)."""


def encode_infer_response(
    response: InferResponse,
    prefs: OutputPrefs,
    *,
    request_id: str = "",
    on_loop: bool = False,
) -> tuple[list[bytes | memoryview], int | None]:
    """Return the body chunks and the JSON header length (None without binary data).

    With ``on_loop``, an output of ``SLICED_OUTPUT_ELEMENTS`` or more to be written as
    JSON raises :class:`BigJsonOutput` instead (its text is not written on the loop)."""
    rid = response.id or request_id
    by_name = prefs.by_name
    if (prefs.default_binary or by_name) and not response.parameters:
        fast = _encode_all_binary(response, prefs, rid)
        if fast is not None:
            return fast
    default = BINARY_PREF if prefs.default_binary else JSON_PREF
    doc: dict = {}
    if rid:
        doc["id"] = rid
    doc["model_name"] = response.model_name
    doc["model_version"] = response.model_version
    if response.parameters:
        doc["parameters"] = _parameters(response.parameters)
    outputs: list[dict] = []
    binaries: list[bytes | memoryview] = []
    floats: list[dict] = []
    big: list[tuple[str, str, np.ndarray]] = []
    for out in response.outputs:
        pref = by_name.get(out.name, default) if by_name else default
        datatype = out.datatype
        shape = out.shape  # orjson writes tuples and numpy integers as JSON arrays and numbers
        array = out.data
        count = 1
        for d in shape:
            count *= d
        if array is None or (array.size if type(array) is np.ndarray else np.size(array)) != count:
            raise InternalError(
                f"output tensor shape does not match size of output for '{out.name}'"
            )
        entry: dict = {"name": out.name, "datatype": datatype, "shape": shape}
        if pref.shared_memory or out.shared_memory:
            pass  # the data went to the client's region; Triton sends no parameters either
        elif pref.binary:
            raw = _raw_bytes(datatype, array)
            size = len(raw)
            entry["parameters"] = {"binary_data_size": size}
            if size:
                binaries.append(raw)
        elif count >= SLICED_OUTPUT_ELEMENTS and datatype not in _NOT_SLICED:
            if on_loop:
                raise BigJsonOutput
            # Written a slice at a time once the rest is (see json_data_chunks).
            entry["data"] = f"\x00{_MARK}-big-{len(big)}\x00"
            big.append((out.name, datatype, array))
        else:
            entry["data"] = encode_json_data(out.name, datatype, array)
            if datatype == "FP32" or datatype == "FP64":
                floats.append(entry)
        outputs.append(entry)
    doc["outputs"] = outputs
    header = orjson.dumps(doc, option=_DUMPS_OPTIONS)
    if floats and b"null" in header:
        header = _with_nonfinite(doc, floats)
    if big:
        pieces = _with_big_data(header, big)
        length = sum(map(len, pieces))
        if binaries:
            return [*pieces, *binaries], length
        return pieces, None
    if binaries:
        return [header, *binaries], len(header)
    return [header], None


def _with_big_data(header: bytes, big: list[tuple[str, str, np.ndarray]]) -> list:
    """``header``'s chunks with each big output's data text where its marker is."""
    pieces: list[bytes | memoryview] = []
    for i, (name, datatype, array) in enumerate(big):
        marker = f'"\\u0000{_MARK}-big-{i}\\u0000"'.encode()
        before, _, header = header.partition(marker)
        pieces.append(before)
        pieces.extend(json_data_chunks(name, datatype, array))
    pieces.append(header)
    return pieces


# (id, model, version, ((name, datatype, shape, size), ...)) -> JSON header. Responses of
# one client look alike, so the header is built once per distinct layout (exact reuse).
_HEADERS: dict[tuple, bytes] = {}
_HEADERS_LIMIT = 1024


def _encode_all_binary(
    response: InferResponse, prefs: OutputPrefs, rid: str
) -> tuple[list[bytes | memoryview], int | None] | None:
    """The common case (every output binary, fixed-size types), or None to take the
    general path."""
    chunks: list[bytes | memoryview] = [b""]
    layout = []
    for out in response.outputs:
        pref = prefs.get(out.name)
        datatype = out.datatype
        if not pref.binary or pref.shared_memory or datatype == "BYTES":
            return None
        array = out.data
        count = 1
        for d in out.shape:
            count *= d
        if array is None or array.size != count:
            return None
        raw = _raw_bytes(datatype, array)
        size = len(raw)
        if size:
            chunks.append(raw)
        layout.append((out.name, datatype, out.shape, size))
    if not layout:
        return None
    key = (rid, response.model_name, response.model_version, tuple(layout))
    header = _HEADERS.get(key)
    if header is None:
        doc: dict = {}
        if rid:
            doc["id"] = rid
        doc["model_name"] = response.model_name
        doc["model_version"] = response.model_version
        doc["outputs"] = [
            {
                "name": name,
                "datatype": datatype,
                "shape": [int(d) for d in shape],
                "parameters": {"binary_data_size": size},
            }
            for name, datatype, shape, size in layout
        ]
        header = orjson.dumps(doc, option=_DUMPS_OPTIONS)
        if len(_HEADERS) >= _HEADERS_LIMIT:
            _HEADERS.clear()
        _HEADERS[key] = header
    chunks[0] = header
    # Without any binary bytes the body is plain JSON, as on the general path.
    return chunks, (len(header) if len(chunks) > 1 else None)


def _with_nonfinite(doc: dict, floats: list[dict]) -> bytes:
    """Re-encode ``doc`` with NaN/Infinity spelled as Triton does (orjson writes null)."""
    prepared: list[bytes] = []
    for entry in floats:
        text = nonfinite_json(entry["data"])
        if text is not None:
            entry["data"] = f"\x00{_MARK}-{len(prepared)}\x00"
            prepared.append(text)
    header = orjson.dumps(doc, option=_DUMPS_OPTIONS)
    for i, text in enumerate(prepared):
        marker = f'"\\u0000{_MARK}-{i}\\u0000"'.encode()
        header = header.replace(marker, text, 1)
    return header
