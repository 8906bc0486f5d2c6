"""Triton's response cache: responses of models with ``response_cache { enable: true }``
kept by the main process and answered again for requests with the same inputs.

``key`` hashes a request's inputs; ``store`` is the server-wide bounded LRU store and its
counters; ``version_cache`` puts one served version in front of its scheduler (lookups,
insertion, identical requests in flight answered by one execution).
"""

from __future__ import annotations

from tritium.service.cache.config import CacheConfig, new_store, parse_cache_config
from tritium.service.cache.store import CachedResponse, ResponseStore
from tritium.service.cache.version_cache import VersionCache, cache_for

__all__ = [
    "CacheConfig",
    "CachedResponse",
    "ResponseStore",
    "VersionCache",
    "cache_for",
    "new_store",
    "parse_cache_config",
]
