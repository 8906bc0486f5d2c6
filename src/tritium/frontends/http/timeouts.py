"""How long an HTTP/1.1 connection may wait in each phase before it is closed.

``keep_alive``: idle between requests (and before the first one); the connection is
closed quietly. ``header``: from the first byte of a request until its head is complete,
however slowly the bytes trickle in. ``body``: with no body byte arriving. A head or body
that times out is answered 408 and the connection closed. 0 disables a timeout.
While a request is being handled no timeout runs: models may take as long as they take.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_KEEP_ALIVE_S = 75.0
DEFAULT_HEADER_S = 30.0
DEFAULT_BODY_S = 60.0


@dataclass(frozen=True, slots=True)
class HttpTimeouts:
    keep_alive: float = DEFAULT_KEEP_ALIVE_S
    header: float = DEFAULT_HEADER_S
    body: float = DEFAULT_BODY_S

    def __post_init__(self) -> None:
        for name in ("keep_alive", "header", "body"):
            if getattr(self, name) < 0:
                raise ValueError(f"HTTP {name} timeout must be >= 0, got {getattr(self, name)}")
