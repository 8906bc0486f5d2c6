"""Restricted API groups: Triton's ``--http-restricted-api`` and
``--grpc-restricted-protocol``.

Each option reads ``<group>[,<group>...]:<key>=<value>``: a request to any endpoint of
those groups must carry header ``<key>`` (gRPC: ``triton-grpc-protocol-<key>``) with
exactly ``<value>``. Which group an endpoint belongs to is decided here, from its HTTP
route pattern or its gRPC method name, so every route and alias gets its group without
its handler knowing. Values are compared in constant time and never shown: not in
``repr``, not in error messages, not in logs.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Triton's API group names.
GROUPS = (
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
)

#: The prefix Triton puts before a gRPC restriction's key.
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"

# Triton's gRPC methods (and grpc.health.v1's Check) by group.
_GRPC_GROUPS = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "Check": "health",
    "Watch": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "ModelConfig": "model-config",
    "ModelStatistics": "statistics",
    "RepositoryIndex": "model-repository",
    "RepositoryModelLoad": "model-repository",
    "RepositoryModelUnload": "model-repository",
    "SystemSharedMemoryStatus": "shared-memory",
    "SystemSharedMemoryRegister": "shared-memory",
    "SystemSharedMemoryUnregister": "shared-memory",
    "CudaSharedMemoryStatus": "shared-memory",
    "CudaSharedMemoryRegister": "shared-memory",
    "CudaSharedMemoryUnregister": "shared-memory",
    "TraceSetting": "trace",
    "LogSettings": "logging",
}

# The last segment of a route under /v2/models/{model}[/versions/{version}].
_MODEL_ROUTE_GROUPS = {
    "ready": "health",
    "config": "model-config",
    "infer": "inference",
    "generate": "inference",
    "generate_stream": "inference",
    "stats": "statistics",
    "trace": "trace",
    "setting": "trace",
    "load": "model-repository",
    "unload": "model-repository",
}


def grpc_method_group(name: str) -> str | None:
    """The group of a gRPC method (``ModelInfer`` → ``inference``); None when none."""
    return _GRPC_GROUPS.get(name)


def http_route_group(pattern: str) -> str | None:
    """The group of an HTTP route pattern, e.g. ``/v2/models/{model}/infer`` →
    ``inference``; None for routes outside Triton's groups (e.g. metrics)."""
    parts = [p for p in pattern.split("/") if p]
    if not parts or parts[0] != "v2":
        return None
    rest = parts[1:]
    if not rest:
        return "metadata"  # GET /v2
    head = rest[0]
    if head == "health":
        return "health"
    if head in ("systemsharedmemory", "cudasharedmemory"):
        return "shared-memory"
    if head == "repository":
        return "model-repository"
    if head == "trace":
        return "trace"
    if head == "logging":
        return "logging"
    if head == "models":
        if rest[1:] == ["stats"]:
            return "statistics"
        tail = rest[2:]
        if tail[:1] == ["versions"]:
            tail = tail[2:]
        if not tail:
            return "metadata"  # model metadata
        return _MODEL_ROUTE_GROUPS.get(tail[-1])
    return None


@dataclass(frozen=True, slots=True)
class Restriction:
    """A header a request must carry: ``header`` (lower case) with value ``value``."""

    header: str
    value: bytes = field(repr=False)

    def allows(self, given: str | bytes | None) -> bool:
        """Whether ``given`` (the request's value of ``header``) is the right one, in
        time that does not depend on where the two values differ."""
        if given is None:
            return False
        if isinstance(given, str):
            given = given.encode("utf-8", "surrogateescape")
        return hmac.compare_digest(given, self.value)

    def http_message(self) -> str:
        return f"This API is restricted, expecting header '{self.header}'"

    def grpc_message(self) -> str:
        return f"This protocol is restricted, expecting header '{self.header}'"


@dataclass(frozen=True)
class RestrictedApis:
    """Restrictions by group; an empty one restricts nothing."""

    by_group: dict[str, Restriction] = field(default_factory=dict, repr=False)

    def __bool__(self) -> bool:
        return bool(self.by_group)

    def for_group(self, group: str | None) -> Restriction | None:
        return self.by_group.get(group) if group is not None else None

    @classmethod
    def parse(cls, specs: Iterable[str], flag: str, header_prefix: str = "") -> RestrictedApis:
        """Read ``<groups>:<key>=<value>`` specs; ValueError (never echoing the value)
        for a malformed spec, an unknown group or a group named twice."""
        by_group: dict[str, Restriction] = {}
        for spec in specs:
            groups, sep, pair = spec.partition(":")
            key, eq, value = pair.partition("=")
            key = key.strip().lower()
            if not sep or not eq or not key or not groups.strip():
                raise ValueError(
                    f"{flag} format is '<groups>:<key>=<value>' (groups separated by commas)"
                )
            restriction = Restriction(header_prefix + key, value.encode("utf-8"))
            for group in (g.strip() for g in groups.split(",")):
                if group not in GROUPS:
                    raise ValueError(
                        f"unknown {flag} group '{group}' (choose from {', '.join(GROUPS)})"
                    )
                if group in by_group:
                    raise ValueError(f"{flag}: group '{group}' is restricted more than once")
                by_group[group] = restriction
        return cls(by_group)
