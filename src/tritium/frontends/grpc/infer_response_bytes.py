"""Serialised ``ModelInferResponse`` / ``ModelStreamInferResponse`` bytes, built without
message objects.

Fields are serialised in field-number order, so the model fields and the output
descriptions of a response are the same bytes for every response with the same model,
version, output names, types and shapes: they are serialised once (by protobuf) and
reused, and only the id and the raw contents are spliced in per response. The result is
byte for byte what :func:`~tritium.frontends.grpc.infer_codec.encode_infer_response`
followed by ``SerializeToString`` gives, which stays the path for responses with
parameters. A response-cache hit reuses the whole serialised response of an earlier hit
(:func:`hit_response_split`), splicing in only its id.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2

from tritium.core import datatypes
from tritium.core.types import EncodedForms, InferResponse
from tritium.frontends.grpc.infer_codec import encode_infer_response, raw_output_bytes
from tritium.frontends.grpc.replays import ReplayKey

_RAW_OUTPUT_TAG = b"\x32"  # ModelInferResponse.raw_output_contents (field 6, the last)
_INFER_RESPONSE_TAG = b"\x12"  # ModelStreamInferResponse.infer_response (field 2)
_SKELETONS_LIMIT = 256
_ID_TAG = b"\x1a"  # ModelInferResponse.id (field 3)
_skeletons: dict[tuple, tuple[bytes, bytes]] = {}
_FORM = "grpc"  # this frontend's keys among a cached response's encoded forms


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _raw_view(datatype: str, array: np.ndarray) -> tuple[int, Any]:
    """(byte size, bytes-like) of one output's raw content, without a copy when the
    array already has the wire layout."""
    if datatype == "BYTES":
        wire = datatypes.wire_bytes(array)
        return len(wire), wire
    dtype = datatypes.raw_dtype(datatype)
    if array.dtype == dtype and array.flags.c_contiguous:
        return array.nbytes, array.data.cast("B") if array.ndim else array.tobytes()
    data = raw_output_bytes(datatype, array)
    return len(data), data


#: Responses with at least this many bytes of raw contents are kept in parts (see
#: :class:`SplitMessage`) by :func:`encode_infer_response_split`.
SPLIT_BYTES = 512 * 1024


class SplitMessage:
    """A serialised message left in its parts, in order: a big response whose raw
    contents are views of its outputs' memory. Joining 64 MiB takes tens of milliseconds
    that every other client would wait; the HTTP/2 sender frames each part as it is."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self.size = sum(map(len, parts))

    def __len__(self) -> int:
        return self.size

    def joined(self) -> bytes:
        return b"".join(self.parts)


def encode_infer_response_split(
    response: InferResponse, request_id: str = "", replay: ReplayKey | None = None
) -> bytes | SplitMessage:
    """:func:`encode_infer_response_bytes`, but a response with :data:`SPLIT_BYTES` or
    more of raw contents is returned in its parts, not joined. A response-cache hit
    reuses an earlier hit's bytes (:func:`hit_response_split`), and files ``replay``."""
    if response.encoded_forms is not None:
        return hit_response_split(response.encoded_forms, response, request_id, replay)
    parts, raw = _response_parts(response, response.id or request_id)
    if type(parts) is bytes:
        return parts
    # Not bytes: a list of parts.
    return SplitMessage(parts) if raw >= SPLIT_BYTES else b"".join(parts)  # type: ignore[arg-type]


def encode_infer_response_bytes(response: InferResponse, request_id: str = "") -> bytes:
    """The serialised form of :func:`encode_infer_response`'s message, built without
    one. Fields are serialised in field-number order, so the model fields and the output
    descriptions are serialised once per distinct (model, version, output names, types,
    shapes) and reused; the id and the raw contents are spliced in. Responses with
    parameters are serialised through protobuf."""
    parts, _ = _response_parts(response, response.id or request_id)
    return parts if type(parts) is bytes else b"".join(parts)  # type: ignore[arg-type]  # parts


def _response_parts(response: InferResponse, response_id: str) -> tuple[bytes | list[Any], int]:
    """The serialised response, with ``response_id`` as its id, as its parts in order (the
    model fields first), or whole bytes when protobuf serialised it (responses with
    parameters); and the bytes of its raw contents."""
    outputs = response.outputs
    if len(outputs) == 1:  # the usual case, keyed without a tuple per output
        out = outputs[0]
        if response.parameters or out.parameters:
            return encode_infer_response(response, response_id).SerializeToString(), 0
        key: tuple = (response.model_name, response.model_version, out.name, out.datatype, out.shape)
    else:
        if response.parameters or any(out.parameters for out in outputs):
            return encode_infer_response(response, response_id).SerializeToString(), 0
        key = (
            response.model_name,
            response.model_version,
            *[(out.name, out.datatype, out.shape) for out in outputs],
        )
    skeleton = _skeletons.get(key)
    if skeleton is None:
        head = service_pb2.ModelInferResponse(
            model_name=response.model_name, model_version=response.model_version
        ).SerializeToString()
        message = service_pb2.ModelInferResponse()
        for out in outputs:
            message.outputs.add(
                name=out.name, datatype=out.datatype, shape=[int(d) for d in out.shape]
            )
        skeleton = (head, message.SerializeToString())
        if len(_skeletons) >= _SKELETONS_LIMIT:
            _skeletons.clear()
        _skeletons[key] = skeleton
    if response_id:
        encoded = response_id.encode()
        parts: list[Any] = [skeleton[0], _ID_TAG + _varint(len(encoded)), encoded, skeleton[1]]
    else:
        parts = list(skeleton)
    raw = 0
    for out in outputs:
        if out.shared_memory:
            parts.append(b"\x32\x00")
            continue
        size, data = _raw_view(out.datatype, out.data)
        parts.append(_RAW_OUTPUT_TAG + _varint(size))
        parts.append(data)
        raw += size
    return parts, raw


def hit_response_split(
    forms: EncodedForms,
    response: InferResponse,
    request_id: str = "",
    replay: ReplayKey | None = None,
) -> bytes | SplitMessage:
    """:func:`encode_infer_response_split` of a response-cache hit (its entry: ``forms``).

    The response is serialised once per set of outputs returned, without its id, as the
    model fields and the rest, kept with the entry; each hit splices its id field between
    the two, where the serialiser puts it (field 3 after fields 1 and 2): the bytes a miss
    gives. ``replay`` (the request's replay key) is filed as answered by that form."""
    outputs = response.outputs
    if len(outputs) == 1:
        key: tuple = (_FORM, outputs[0].name)
    else:
        key = (_FORM, *[out.name for out in outputs])
    kept = forms.encoded(key)
    if kept is None:
        parts, _ = _response_parts(response, "")
        if not isinstance(parts, list):  # with parameters: serialised by protobuf, not kept
            parts, _ = _response_parts(response, response.id or request_id)
            return parts  # type: ignore[return-value]  # not a list: bytes
        head: bytes = parts[0]
        kept = (head, b"".join(parts[1:]))
        forms.keep_encoded(key, kept, len(head) + len(kept[1]))
    if replay is not None:
        forms.keep_replay(replay.key, key, replay.nbytes)
    return spliced(kept, response.id or request_id)


def spliced(kept: tuple[bytes, bytes], response_id: str) -> bytes | SplitMessage:
    """A kept form (the serialised response without its id, in two parts) with
    ``response_id`` spliced in as its id field."""
    head, tail = kept
    if not response_id:
        return SplitMessage([head, tail]) if len(tail) >= SPLIT_BYTES else head + tail
    encoded = response_id.encode()
    id_field = _ID_TAG + _varint(len(encoded)) + encoded
    if len(tail) >= SPLIT_BYTES:
        return SplitMessage([head, id_field, tail])
    return b"".join((head, id_field, tail))


def hit_response_bytes(
    forms: EncodedForms, response: InferResponse, request_id: str = ""
) -> bytes:
    """:func:`hit_response_split`, joined."""
    hit = hit_response_split(forms, response, request_id)
    return hit.joined() if type(hit) is SplitMessage else hit  # type: ignore[return-value]


#: ``ModelInferResponse`` fields holding only ``triton_final_response`` = key, appended to
#: a serialised response (protobuf fields may come in any order, map entries too).
FINAL_RESPONSE_FIELD = {
    final: service_pb2.ModelInferResponse(
        parameters={"triton_final_response": service_pb2.InferParameter(bool_param=final)}
    ).SerializeToString()
    for final in (False, True)
}


def stream_response_split(
    infer_response: bytes | SplitMessage, suffix: bytes = b""
) -> bytes | SplitMessage:
    """:func:`stream_response_bytes` of a response that may be left in its parts (see
    :func:`encode_infer_response_split`): then the stream's message is left in parts too."""
    if type(infer_response) is not SplitMessage:
        return stream_response_bytes(infer_response, suffix)  # type: ignore[arg-type]
    size = infer_response.size + len(suffix)
    return SplitMessage([_INFER_RESPONSE_TAG, _varint(size), *infer_response.parts, suffix])


def stream_response_bytes(infer_response: bytes, suffix: bytes = b"") -> bytes:
    """A serialised ``ModelStreamInferResponse`` carrying one serialised response, with
    ``suffix`` (more serialised ``ModelInferResponse`` fields) appended to it."""
    size = len(infer_response) + len(suffix)
    return b"".join((_INFER_RESPONSE_TAG, _varint(size), infer_response, suffix))
