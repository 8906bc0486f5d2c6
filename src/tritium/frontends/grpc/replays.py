"""Response-cache hits replayed over gRPC, as over HTTP (``http/reused_bodies``).

A small serialised ``ModelInferRequest`` answered from the cache is filed with the entry as
a *replay*: its bytes less the ``id`` field key the form that answered it. The next
request with those bytes (any id) is answered from the form at once, without decoding,
keying or looking anything up; the service counts it as the hit it is. Serialisers write
fields in field-number order: ``model_name`` (1), ``model_version`` (2), then ``id`` (3);
a request laid out otherwise keys with its id, and is filed only when the id it would be
answered with is the one split off here.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

from tritium.frontends.grpc.infer_plans import field_at

#: Requests up to this size are keyed whole for a replay.
REPLAY_BYTES = 4096
_NAME, _VERSION, _ID = 0x0A, 0x12, 0x1A  # field tags (length-delimited) 1, 2 and 3


class ReplayKey(NamedTuple):
    key: Hashable
    model: str
    version: str
    request_id: str
    nbytes: int  # what the key costs in the cache


def _field(data: bytes | memoryview, pos: int, tag: int) -> tuple[int, int] | None:
    """(start, end) of the value of field ``tag`` when it is the one at ``pos``, else None."""
    if pos >= len(data) or data[pos] != tag:
        return None
    found = field_at(data, pos)
    return None if found is None else found[1:]


def model_name(data: bytes | memoryview) -> str | None:
    """The ``model_name`` field when the request starts with it."""
    span = _field(data, 0, _NAME)
    if span is None:
        return None
    try:
        return bytes(data[span[0] : span[1]]).decode()
    except UnicodeDecodeError:
        return None


def replay_key(data: bytes) -> ReplayKey | None:
    """The replay key of a serialised request, or None for one not keyed so."""
    name = _field(data, 0, _NAME)
    if name is None:
        return None
    pos = name[1]
    version = _field(data, pos, _VERSION)
    if version is not None:
        pos = version[1]
    found = _field(data, pos, _ID)
    try:
        model = data[name[0] : name[1]].decode()
        version_text = "" if version is None else data[version[0] : version[1]].decode()
        request_id = "" if found is None else data[found[0] : found[1]].decode()
    except UnicodeDecodeError:
        return None
    key = data[:pos] + data[found[1] :] if found is not None else data
    return ReplayKey(key, model, version_text, request_id, len(key))
