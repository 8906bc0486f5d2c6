"""Response-cache hits answered over HTTP with the bytes of an earlier identical answer.

A hit's response carries its cache entry (``InferResponse.encoded_forms``). The first hit
in a form (the outputs it returns, and whether each is binary) is encoded as usual, and
the body after its ``id`` member is kept with the entry; the next hits in that form write
``{"id":<their id>,`` (or ``{`` without an id) before those bytes and encode nothing. The
encoder writes ``id`` first, so the spliced body is byte for byte the one it would write,
and the JSON header length of a binary answer is the kept one plus the new head's.
"""

from __future__ import annotations

from collections.abc import Hashable

import orjson

from tritium.core.types import EncodedForms, InferResponse
from tritium.frontends.http.output_prefs import OutputPrefs

_FORM = "http"

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
    if kept is None:
        return None
    tail, json_tail = kept
    head = _head(request_id)
    return [head, tail], (None if json_tail is None else len(head) + json_tail)


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
