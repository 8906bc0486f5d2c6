"""Huge JSON infer bodies, read a slice at a time.

``orjson`` parses a whole document in one call that holds the GIL: a 48 MB body of
numbers kept every other client waiting for seconds, even from an offload thread, and
became hundreds of MB of Python floats. Bodies of ``SLICED_JSON_BYTES`` or more are read
in pieces instead:

1. :func:`find_spans` locates each ``"data": [...]`` array of numbers and literals
   (no strings or objects inside), scanning a bounded window per call, and each flat
   array of strings, its elements found a run at a time;
2. the rest of the document, with each such array replaced by a placeholder string, is
   parsed with ``orjson`` as usual (it is small);
3. :class:`SpanReader` hands each array's text to ``orjson`` a slice of ``SLICE_BYTES``
   at a time (cut at commas; between strings, at commas found with them), so the event
   loop's thread gets the GIL back between slices and only one slice's Python objects are
   alive at a time.

Anything this reader is not sure of (a syntax error it cannot place, any error in an array
of strings, empty nested arrays, deep nesting) raises :class:`Unsliceable` and the plain decoder decides, so
results and error messages are exactly the plain decoder's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import orjson

#: JSON headers at least this big are read a slice at a time.
SLICED_JSON_BYTES = 1 << 20
#: Text of one slice of a data array (about 1 ms of parsing).
SLICE_BYTES = 256 * 1024
#: Bytes looked at per call while locating data arrays.
_WINDOW = 1 << 20
#: Deeper data arrays are left to the plain decoder (orjson's own depth limit applies).
_MAX_DEPTH = 32

_WS = rb"[ \t\n\r]*"
_DATA_KEY = re.compile(rb'"data"' + _WS + rb":" + _WS + rb"\[")
# Outside strings and objects, an array of numbers holds only these characters.
_FOREIGN = re.compile(rb"[^0-9A-Za-z+\-.,\[\] \t\n\r]")
_TOKEN = rb"[0-9A-Za-z+\-.]"
# Nesting that brackets-stripped text would hide: an empty array, a missing or extra
# comma next to a bracket.
_BAD_NESTING = re.compile(
    rb"\[" + _WS + rb"[,\]]"
    rb"|[0-9A-Za-z+\-.\]]" + _WS + rb"\["
    rb"|," + _WS + rb"[,\]]"
    rb"|\]" + _WS + _TOKEN
)
_OPEN, _CLOSE = ord("["), ord("]")
_OPENS_STRING = re.compile(_WS + rb'"')


class Unsliceable(Exception):
    """The body is left to the plain decoder (which words its error exactly)."""


class SyntaxAt(Exception):
    """orjson's message for the document's first syntax error, at byte ``at``."""

    def __init__(self, message: str, at: int) -> None:
        super().__init__(message)
        self.message = message
        self.at = at


@dataclass(frozen=True, slots=True)
class Span:
    """A data array's text: ``body[start]`` is its ``[``, ``body[end]`` its ``]``.

    ``cuts`` (an array of strings only): offsets of commas between its elements, one per
    run of elements found at once (4096), where its slices may end."""

    start: int
    end: int
    nested: bool
    cuts: tuple[int, ...] | None = None


# One JSON string (an escape taken whole; raw control characters are not JSON) and the
# comma after it, a run of them per call; the last one and its "]".
_STRING = rb'"(?:[^"\\\x00-\x1f]|\\.)*"'


def strings_run(most: int) -> re.Pattern[bytes]:
    return re.compile(rb"(?:" + _WS + _STRING + _WS + rb",){1,%d}" % most, re.DOTALL)


_STRINGS_RUN = strings_run(4096)
_LAST_STRING = re.compile(_WS + _STRING + _WS + rb"\]", re.DOTALL)


def _string_span_at(body: bytes, start: int, length: int) -> Span | None:
    """The array opening at ``start`` if it is a flat array of strings: found a run of
    elements per call, so no call holds the interpreter long."""
    p = start + 1
    cuts = []
    while True:
        run = _STRINGS_RUN.match(body, p, length)
        if run is None:
            break
        p = run.end()
        cuts.append(p - 1)
    last = _LAST_STRING.match(body, p, length)
    if last is None:
        return None
    return Span(start, last.end() - 1, False, tuple(cuts))


def _span_at(body: bytes, start: int, length: int) -> Span | None:
    """The array opening at ``start`` if it holds only numbers, literals and arrays."""
    depth = deepest = 0
    p = start
    while p < length:
        stop = min(length, p + _WINDOW)
        foreign = _FOREIGN.search(body, p, stop)
        limit = foreign.start() if foreign is not None else stop
        if body.count(b"]", p, limit) == 0:
            depth += body.count(b"[", p, limit)
            deepest = max(deepest, depth)
        else:
            window = np.frombuffer(body, np.uint8, limit - p, p)
            steps = (window == _OPEN).view(np.int8) - (window == _CLOSE).view(np.int8)
            walk = np.cumsum(steps, dtype=np.int64)
            walk += depth
            closed = np.flatnonzero(walk == 0)
            if closed.size:
                end = int(closed[0])
                deepest = max(deepest, int(walk[: end + 1].max()))
                if deepest > _MAX_DEPTH:
                    return None
                return Span(start, p + end, deepest > 1)
            depth = int(walk[-1])
            deepest = max(deepest, int(walk.max()))
        if deepest > _MAX_DEPTH or foreign is not None:
            return None
        p = limit
    return None


def find_spans(body: bytes, length: int) -> list[Span]:
    """The data arrays of numbers in ``body[:length]``, in document order.

    A ``"data"`` key is found by its text: an unescaped quote cannot occur inside a JSON
    string, so outside a malformed document the match is a key (whose place the caller
    checks once the rest is parsed).
    """
    spans: list[Span] = []
    pos = 0
    while pos < length:
        stop = min(length, pos + _WINDOW)
        match = _DATA_KEY.search(body, pos, min(length, stop + 64))
        if match is None:
            pos = stop
            continue
        if match.start() and body[match.start() - 1] == 0x5C:  # an escaped quote
            pos = match.end()
            continue
        span = _span_at(body, match.end() - 1, length)
        if span is None and _OPENS_STRING.match(body, match.end(), length):
            span = _string_span_at(body, match.end() - 1, length)
        if span is None:
            pos = match.end()
            continue
        spans.append(span)
        pos = span.end + 1
    return spans


def skeleton(body: bytes, length: int, spans: list[Span]) -> tuple[bytes, list[str]]:
    """``body[:length]`` with each span replaced by a placeholder string no client can
    guess, and the placeholders."""
    nonce = os.urandom(8).hex()
    marks = [f"#tritium-slice-{nonce}-{k}" for k in range(len(spans))]
    parts = []
    pos = 0
    for span, mark in zip(spans, marks, strict=True):
        parts.append(body[pos : span.start])
        parts.append(b'"%s"' % mark.encode())
        pos = span.end + 1
    parts.append(body[pos:length])
    return b"".join(parts), marks


def _cuts(body: bytes, span: Span) -> Iterator[tuple[int, int]]:
    """Byte ranges of a span's slices: its text between brackets, cut at commas."""
    p = span.start + 1
    end = span.end
    while end - p > SLICE_BYTES:
        cut = body.rfind(b",", p, p + SLICE_BYTES)
        if cut < 0:
            cut = body.find(b",", p + SLICE_BYTES, end)
            if cut < 0:
                break
        yield p, cut
        p = cut + 1
    yield p, end


class SpanReader:
    """Parses spans of one body a slice at a time; remembers how far it has read so
    that the first syntax error of the document is the one reported."""

    def __init__(self, body: bytes, spans: list[Span]) -> None:
        self._body = body
        self.spans = spans
        self.read = 0  # spans before this one are fully parsed

    def values(self, k: int) -> Iterator[list]:
        """Span ``k``'s elements (flattened), a list per slice."""
        body = self._body
        span = self.spans[k]
        if span.cuts is not None:
            yield from self._strings(span)
            self.read = k + 1
            return
        for p, cut in _cuts(body, span):
            text = body[p:cut]
            if span.nested and (b"[" in text or b"]" in text):
                # Brackets only group elements (nesting is flattened), so they can go
                # once the text next to them is known to be well formed.
                if _BAD_NESTING.search(body, p - 1, cut + 1):
                    raise Unsliceable
                text = text.translate(None, b"[]")
                bracketed = True
            else:
                bracketed = False
            if not text.strip(b" \t\n\r"):
                if p == span.start + 1 and cut == span.end and not bracketed:
                    continue  # "data": []
                raise Unsliceable  # ",," and friends: the plain parser words it
            first = p == span.start + 1
            # Parsed in the state the whole document is in at this point: just after
            # the array's "[" or after a comma.
            prefix = b"[" if first else b"[0,"
            try:
                values = orjson.loads(prefix + text + b"]")
            except orjson.JSONDecodeError as exc:
                at = exc.pos - len(prefix)
                if bracketed or at >= len(text) or text.rstrip(b" \t\n\r").endswith(b","):
                    # This text's "]" stands where the document has a comma: errors
                    # next to it are worded by the plain parser.
                    raise Unsliceable from None
                raise SyntaxAt(exc.msg, p + at) from None
            yield values if first else values[1:]
        self.read = k + 1

    def _strings(self, span: Span) -> Iterator[list]:
        """An array of strings' elements, a list per slice of about ``SLICE_BYTES``, cut
        at the commas found with it. Any error goes to the plain parser (Unsliceable):
        placing it would need the character count of every string before it."""
        body = self._body
        p = span.start + 1
        for cut in (*span.cuts, span.end):  # type: ignore[misc]
            if cut - p < SLICE_BYTES and cut != span.end:
                continue
            try:
                values = orjson.loads(b"[" + body[p:cut] + b"]")
            except orjson.JSONDecodeError:
                raise Unsliceable from None
            yield values
            p = cut + 1

    def check_rest(self) -> None:
        """Parse the spans not read yet (their syntax errors come before any other)."""
        for k in range(self.read, len(self.spans)):
            for _ in self.values(k):
                pass

    def message(self, error: SyntaxAt) -> str:
        """orjson's wording of ``error`` for the whole document: its line, column and
        character index (orjson counts characters, not bytes)."""
        body = self._body
        at = error.at
        lines = body.count(b"\n", 0, at)
        newline = body.rfind(b"\n", 0, at)
        char = self._char_index(at)
        column = char - (self._char_index(newline) if newline >= 0 else -1)
        return f"{error.message}: line {lines + 1} column {column} (char {char})"

    def _char_index(self, at: int) -> int:
        # Less the continuation bytes of multi-byte characters before ``at`` (string
        # spans can hold them too). Only an error message needs it.
        return at - _continuations(self._body, 0, at)


def _continuations(body: bytes, start: int, end: int) -> int:
    if body[start:end].isascii():
        return 0
    chunk = np.frombuffer(body, np.uint8, end - start, start)
    return int(np.count_nonzero((chunk & 0xC0) == 0x80))
