"""HPACK decoding of request header blocks, with repeated blocks served from a cache.

A client on a warm connection sends the same fully indexed block for every call to one
method; decoding it again gives the same list while the decoder's dynamic table is
unchanged, so such blocks are remembered (the same list object is returned, which lets
callers memoise what they derive from it) until a decode changes the table.
"""

from __future__ import annotations

from hpack import Decoder
from hpack.exceptions import HPACKError

#: Blocks remembered at most (the cache is emptied whenever the table changes anyway).
MAX_CACHED = 256


class HeaderBlockError(Exception):
    """The block is not valid HPACK (a connection error: COMPRESSION_ERROR)."""


class HeaderBlockDecoder:
    """One connection's HPACK decoder; see the module docstring."""

    def __init__(self, max_header_list_size: int) -> None:
        self._decoder = Decoder()
        self._decoder.max_header_list_size = max_header_list_size
        self._cache: dict[bytes, list[tuple[str, str]]] = {}

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        """The headers of ``block`` (every block must be decoded, in order: the table
        must stay in step with the peer's). Raises :class:`HeaderBlockError`."""
        cached = self._cache.get(block)
        if cached is not None:
            return cached
        table = self._decoder.header_table
        entries = table.dynamic_entries
        before = (len(entries), entries[0] if entries else None, table.maxsize)
        try:
            headers = self._decoder.decode(block)
        except HPACKError as exc:
            raise HeaderBlockError(str(exc)) from None
        after = (len(entries), entries[0] if entries else None, table.maxsize)
        if after[0] == before[0] and after[1] is before[1] and after[2] == before[2]:
            # Decoding left the table as it was, so the same bytes decode the same way
            # until the table changes.
            if len(self._cache) < MAX_CACHED:
                self._cache[block] = headers  # type: ignore[assignment]
        else:
            self._cache.clear()
        return headers  # type: ignore[return-value]
