"""Response-cache hits answered over HTTP with the bytes of an earlier identical answer.

A hit's response carries its cache entry (``InferResponse.encoded_forms``). The first hit
in a form (the outputs it returns, and whether each is binary) is encoded as usual, and
the body after its ``id`` member is kept with the entry; the next hits in that form write
``{"id":<their id>,`` (or ``{`` without an id) before those bytes and encode nothing. The
encoder writes ``id`` first, so the spliced body is byte for byte the one it would write,
and the JSON header length of a binary answer is the kept one plus the new head's.

A small request answered that way is also filed with the entry as a *replay*: its bytes
less a leading ``id`` member (clients number their requests) key the form that answered
it. The next request with those bytes (any id) is answered from the form at once, without
decoding, keying or looking anything up; the service counts it as the hit it is. Same
bytes, same model version: the same decoded request, so the same answer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

import orjson

from tritium.core.types import EncodedForms, InferResponse
from tritium.frontends.http.infer_decode import ID_FIRST
from tritium.frontends.http.output_prefs import OutputPrefs
from tritium.frontends.http.response_bytes import infer_ok_bytes

_FORM = "http"
#: Requests with bodies up to this size are keyed whole for a replay.
REPLAY_BYTES = 4096

#: (body chunks, JSON header length or None for a plain JSON body), as the encoder gives.
Body = tuple[list[bytes | memoryview], int | None]


def form_key(response: InferResponse, prefs: OutputPrefs) -> Hashable:
    """The form of ``response`` as ``prefs`` asks it: each output's name and binary flag."""
    get = prefs.get
    outputs = response.outputs
    if len(outputs) == 1:
        name = outputs[0].name
        return (_FORM, name, get(name).binary)
    return (_FORM, *[(o.name, get(o.name).binary) for o in outputs])


def _head(request_id: str) -> bytes:
    return b'{"id":' + orjson.dumps(request_id) + b"," if request_id else b"{"


def reused_body(forms: EncodedForms, key: Hashable, request_id: str) -> Body | None:
    """The body kept for ``key``, with ``request_id`` spliced in; None if none is kept."""
    kept = forms.encoded(key)
    return None if kept is None else spliced(kept, request_id)


def spliced(kept: tuple[bytes, int | None], request_id: str) -> Body:
    """A kept form (the body after its id, and its JSON header's length after the id)
    with ``request_id`` spliced in."""
    tail, json_tail = kept
    head = _head(request_id)
    return [head, tail], (None if json_tail is None else len(head) + json_tail)


def spliced_answer(kept: tuple[bytes, int | None], request_id: str) -> bytes:
    """:func:`spliced` as a whole keep-alive HTTP/1.1 answer, ready to write."""
    tail, json_tail = kept
    head = _head(request_id)
    return infer_ok_bytes(head, tail, None if json_tail is None else len(head) + json_tail)


def keep_body(
    forms: EncodedForms, key: Hashable, request_id: str, body: Body
) -> None:
    """Keep ``body`` (encoded for a request with ``request_id``) less its id, for
    :func:`reused_body`; counted against the cache's size (not kept when it does not fit)."""
    chunks, json_length = body
    head = _head(request_id)
    whole = b"".join(chunks)
    if not whole.startswith(head):
        return  # not laid out as expected: the next hit encodes again
    tail = whole[len(head) :]
    json_tail = None if json_length is None else json_length - len(head)
    forms.keep_encoded(key, (tail, json_tail), len(tail))


class ReplayKey(NamedTuple):
    key: Hashable
    request_id: str
    nbytes: int  # what the key costs in the cache


def replay_key(
    model: str, version: str, body: bytes, header_length: str | None
) -> ReplayKey | None:
    """The replay key of a request (``body`` up to :data:`REPLAY_BYTES`, its
    ``Inference-Header-Content-Length``); None for a body that is not keyed so (a raw
    tensor body, an id that is not a plain string, a header length that does not parse:
    the full path answers those).

    The key is the body after its opening ``{`` and a leading ``"id"`` member, with what
    is left of its JSON header's length: equal keys, equal requests but for the id."""
    if header_length is None:
        split = len(body)
    elif header_length.isdigit() and header_length.isascii():
        split = int(header_length)
        if not 0 < split <= len(body):
            return None
    else:
        return None
    if not body.startswith(b"{"):
        return None
    request_id = ""
    if body.startswith(ID_FIRST):
        end = body.find(b'"', 7, split)
        if end < 0 or end + 1 >= split or body[end + 1] != 0x2C or b"\\" in body[7:end]:
            return None
        try:
            request_id = body[7:end].decode()
        except UnicodeDecodeError:
            return None
        if not request_id.isprintable():
            return None
        start = end + 2
    else:
        start = 1
    rest = body[start:]
    split -= start
    return ReplayKey((model, version, split, rest), request_id, len(rest) + len(model))
