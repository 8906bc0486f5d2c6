"""The server's ``--cache-config`` values, spelled as Triton spells them.

``--cache-config local,size=N`` (repeatable: one ``<cache>,<key>=<value>`` each) gives
the local cache of ``N`` bytes; the deprecated ``--response-cache-byte-size N`` means the
same. Only the local cache exists here: another cache name (``redis``) is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tritium.service.cache.store import ResponseStore


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """The local response cache: at most ``size`` bytes of responses."""

    size: int


def parse_cache_config(values: Iterable[str], byte_size: int | None = None) -> CacheConfig | None:
    """The cache asked for by ``--cache-config`` values (``local,size=N``) and the
    deprecated ``--response-cache-byte-size``; None when no cache is configured."""
    size: int | None = None
    for value in values:
        if not value.strip():
            continue  # an empty --cache-config= asks for no cache, as Triton's default
        cache, _, setting = value.partition(",")
        cache = cache.strip()
        if cache != "local":
            raise ValueError(
                f"--cache-config: unsupported cache '{cache}' (only the local cache is available)"
            )
        key, eq, text = setting.partition("=")
        if not eq or key.strip() != "size":
            raise ValueError(f"--cache-config: expected 'local,size=<bytes>', got '{value}'")
        size = _byte_count(text, "--cache-config")
    if byte_size is not None and size is None:
        size = byte_size
    if size is None:
        return None
    return CacheConfig(size)


def _byte_count(text: str, flag: str) -> int:
    try:
        size = int(text.strip())
    except ValueError:
        raise ValueError(f"{flag}: size must be a whole number of bytes, got '{text}'") from None
    if size < 0:
        raise ValueError(f"{flag}: size must not be negative, got {size}")
    return size


def new_store(values: Iterable[str], byte_size: int | None = None) -> ResponseStore | None:
    """The server's response store, when ``--cache-config`` (or its older spelling) asks
    for one."""
    config = parse_cache_config(values, byte_size)
    return ResponseStore(config.size) if config is not None else None
