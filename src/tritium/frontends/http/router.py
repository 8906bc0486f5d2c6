"""Method + path routing with typed path parameters, without regular expressions.

Patterns are slash-separated segments; ``{name}`` captures one non-empty segment
(percent-decoded), ``{name:int}`` captures a segment of ASCII digits only (Triton's
``[0-9]+`` for versions). A path that matches a pattern registered for other methods
answers 405, a path that matches nothing answers 404 — as Triton does. Recent lookups
are cached so the hot path costs one dict lookup; the ``params`` dict a handler gets
is shared by every request to the same path, so handlers treat it as read-only.

Every route belongs to the API group its pattern names (``restricted.http_route_group``:
``/v2/models/{model}/infer`` is ``inference``). When a group is restricted
(``--http-restricted-api``), its handlers are wrapped, at registration, in a check of
the required header; routes of other groups pay nothing for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import unquote

from tritium.frontends.http.event_stream import EventStream
from tritium.frontends.http.messages import (
    DeferredResponse,
    HttpRequest,
    HttpResponse,
    error_response,
)
from tritium.frontends.restricted import RestrictedApis, Restriction, http_route_group

Params = dict[str, str]
#: A route's handler: an answer now, one deferred to a completion, a streamed body, or an
#: awaitable answer or streamed body (run as a task).
Handler = Callable[
    [HttpRequest, Params],
    "HttpResponse | DeferredResponse | EventStream | Awaitable[HttpResponse | EventStream]",
]

#: A route's quick answer to a request whose head the connection has seen before (see
#: ``request_heads``): the whole keep-alive HTTP/1.1 answer from the path parameters, the
#: head's headers and the body, or None to take the handler's path.
QuickAnswer = Callable[[Params, dict[str, str], bytes], "bytes | None"]

_CACHE_LIMIT = 4096
_LITERAL, _TEXT, _INT = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Match:
    """A routing result: ``handler`` is None when ``status`` (404 or 405) applies."""

    handler: Handler | None
    params: Params
    status: int = 200
    #: The route's quick answer; None when it has none or its group is restricted.
    quick: QuickAnswer | None = None


_NO_ROUTE = Match(None, {}, 404)
_WRONG_METHOD = Match(None, {}, 405)


@dataclass(frozen=True, slots=True)
class _Route:
    method: str
    segments: tuple[tuple[int, str], ...]
    handler: Handler
    #: The API group of the pattern (None: in no group, never restricted).
    group: str | None
    #: The handler as registered (``handler`` may wrap it in a restriction check).
    registered: Handler
    #: The quick answer as registered (offered only while the route is unrestricted).
    quick: QuickAnswer | None = None


def _guarded(restriction: Restriction, handler: Handler) -> Handler:
    """``handler`` behind Triton's check: 403 unless the header has the right value."""
    header = restriction.header
    allows = restriction.allows
    refusal = error_response(403, restriction.http_message())

    def guarded(
        request: HttpRequest, params: Params
    ) -> HttpResponse | DeferredResponse | EventStream | Awaitable[HttpResponse | EventStream]:
        if not allows(request.headers.get(header)):
            return refusal
        return handler(request, params)

    return guarded


def _compile(pattern: str) -> tuple[tuple[int, str], ...]:
    if not pattern.startswith("/"):
        raise ValueError(f"route pattern must start with '/': {pattern!r}")
    out: list[tuple[int, str]] = []
    for seg in pattern[1:].split("/"):
        if seg.startswith("{") and seg.endswith("}"):
            name, _, kind = seg[1:-1].partition(":")
            if kind not in ("", "int") or not name:
                raise ValueError(f"bad path parameter {seg!r} in {pattern!r}")
            out.append((_INT if kind == "int" else _TEXT, name))
        else:
            out.append((_LITERAL, seg))
    return tuple(out)


class Router:
    """Routes ``(method, path)`` to a handler; ``add`` may be called at any time."""

    def __init__(self, restricted: RestrictedApis | None = None) -> None:
        self._by_length: dict[int, list[_Route]] = {}
        self._cache: dict[tuple[str, str], Match] = {}
        self._restricted = restricted or RestrictedApis()

    def restrict(self, restricted: RestrictedApis) -> None:
        """Apply ``restricted`` to the routes added so far and to every later one."""
        self._restricted = restricted
        for routes in self._by_length.values():
            routes[:] = [
                self._route(r.method, r.segments, r.registered, r.group, r.quick) for r in routes
            ]
        self._cache.clear()

    def _route(
        self,
        method: str,
        segments: tuple[tuple[int, str], ...],
        handler: Handler,
        group: str | None,
        quick: QuickAnswer | None,
    ) -> _Route:
        restriction = self._restricted.for_group(group)
        served = handler if restriction is None else _guarded(restriction, handler)
        return _Route(method, segments, served, group, handler, quick)

    def add(
        self, method: str, pattern: str, handler: Handler, quick: QuickAnswer | None = None
    ) -> None:
        """Register ``handler`` for ``method`` (e.g. "GET") on ``pattern``, with an optional
        ``quick`` answer for repeated heads (a restricted route never offers it).

        When two patterns match one path, the one with a literal segment where the other
        has a parameter wins (``/v2/models/stats`` before ``/v2/models/{model}``), then
        the earlier registration.
        """
        segments = _compile(pattern)
        routes = self._by_length.setdefault(len(segments), [])
        group = http_route_group(pattern)
        routes.append(self._route(method.upper(), segments, handler, group, quick))
        routes.sort(key=lambda r: [kind != _LITERAL for kind, _ in r.segments])
        self._cache.clear()

    def match(self, method: str, path: str) -> Match:
        key = (method, path)
        found = self._cache.get(key)
        if found is not None:
            return found
        found = self._match(method, path)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = found
        return found

    def _match(self, method: str, path: str) -> Match:
        if not path.startswith("/"):
            return _NO_ROUTE
        parts = path[1:].split("/")
        wrong_method = False
        for route in self._by_length.get(len(parts), ()):
            params = _bind(route.segments, parts)
            if params is None:
                continue
            if route.method != method:
                wrong_method = True
                continue
            quick = route.quick if route.handler is route.registered else None
            return Match(route.handler, params, 200, quick)
        return _WRONG_METHOD if wrong_method else _NO_ROUTE


def _bind(segments: tuple[tuple[int, str], ...], parts: list[str]) -> Params | None:
    params: Params = {}
    for (kind, text), part in zip(segments, parts, strict=True):
        if kind == _LITERAL:
            if part != text:
                return None
        elif not part:
            return None
        elif kind == _INT:
            if not (part.isascii() and part.isdigit()):
                return None
            params[text] = part
        else:
            params[text] = unquote(part) if "%" in part else part
    return params
