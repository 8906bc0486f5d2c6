"""Restricted API groups: which group each endpoint belongs to, the spec parser, and the
HTTP route guard (Triton's ``--http-restricted-api`` / ``--grpc-restricted-protocol``)."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.test_http_protocol import IdentityService

from tritium.frontends.grpc.calls import METHODS
from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.messages import HttpRequest, HttpResponse
from tritium.frontends.http.router import Router
from tritium.frontends.restricted import (
    GROUPS,
    GRPC_HEADER_PREFIX,
    RestrictedApis,
    grpc_method_group,
    http_route_group,
)

# Triton's HTTP routes (http_server.cc) and the group each is checked against.
TRITON_ROUTES = {
    "/v2": "metadata",
    "/v2/health/live": "health",
    "/v2/health/ready": "health",
    "/v2/models/{model}": "metadata",
    "/v2/models/{model}/versions/{version:int}": "metadata",
    "/v2/models/{model}/ready": "health",
    "/v2/models/{model}/versions/{version:int}/ready": "health",
    "/v2/models/{model}/config": "model-config",
    "/v2/models/{model}/versions/{version:int}/config": "model-config",
    "/v2/models/{model}/infer": "inference",
    "/v2/models/{model}/versions/{version:int}/infer": "inference",
    "/v2/models/{model}/generate": "inference",
    "/v2/models/{model}/generate_stream": "inference",
    "/v2/models/{model}/versions/{version:int}/generate_stream": "inference",
    "/v2/models/stats": "statistics",
    "/v2/models/{model}/stats": "statistics",
    "/v2/models/{model}/versions/{version:int}/stats": "statistics",
    "/v2/repository/index": "model-repository",
    "/v2/repository/models/{model}/load": "model-repository",
    "/v2/repository/models/{model}/unload": "model-repository",
    "/v2/systemsharedmemory/status": "shared-memory",
    "/v2/systemsharedmemory/region/{region}/register": "shared-memory",
    "/v2/cudasharedmemory/region/{region}/unregister": "shared-memory",
    "/v2/trace/setting": "trace",
    "/v2/models/{model}/trace/setting": "trace",
    "/v2/logging": "logging",
}


@pytest.mark.parametrize(("pattern", "group"), sorted(TRITON_ROUTES.items()))
def test_each_triton_route_has_tritons_group(pattern: str, group: str) -> None:
    assert http_route_group(pattern) == group


def test_every_registered_route_and_grpc_method_has_a_group() -> None:
    router = Router()
    KServeRoutes(IdentityService(), 1024).register(router)
    for routes in router._by_length.values():
        for route in routes:
            assert route.group in GROUPS, route
    for method in METHODS.values():
        assert grpc_method_group(method.name) in GROUPS, method.path


def test_metrics_is_in_no_group() -> None:
    assert http_route_group("/metrics") is None


def test_parse_groups_and_prefix() -> None:
    apis = RestrictedApis.parse(
        ["inference,model-config:Admin-Key=s3cret", "health:k=v"], "--x", GRPC_HEADER_PREFIX
    )
    inference = apis.for_group("inference")
    assert inference is not None and inference.header == "triton-grpc-protocol-admin-key"
    assert apis.for_group("model-config") is inference
    assert apis.for_group("statistics") is None
    assert (
        inference.allows("s3cret") and not inference.allows("s3cre") and not inference.allows(None)
    )
    assert "s3cret" not in repr(apis) and "s3cret" not in repr(inference)


@pytest.mark.parametrize(
    "spec", ["inference", "inference:k", ":k=s3cret", "inference:=s3cret", "bogus:k=s3cret"]
)
def test_malformed_specs_are_refused_without_echoing_the_value(spec: str) -> None:
    with pytest.raises(ValueError) as caught:
        RestrictedApis.parse([spec], "--http-restricted-api")
    assert "s3cret" not in str(caught.value)


def test_a_group_may_be_restricted_once() -> None:
    with pytest.raises(ValueError, match="more than once"):
        RestrictedApis.parse(["health:a=1", "health,trace:b=2"], "--http-restricted-api")


def _call(router: Router, path: str, headers: dict[str, str]) -> HttpResponse:
    match = router.match("GET", path)
    assert match.handler is not None
    return match.handler(HttpRequest("GET", path, "", headers, b""), match.params)


def test_router_guards_restricted_groups_including_routes_added_later() -> None:
    router = Router()
    ok = HttpResponse(200, b"ok", None)
    router.add("GET", "/v2/health/live", lambda r, p: ok)
    router.restrict(RestrictedApis.parse(["health,logging:admin=s3cret"], "--x"))
    router.add("GET", "/v2/logging", lambda r, p: ok)
    router.add("GET", "/v2", lambda r, p: ok)
    for path in ("/v2/health/live", "/v2/logging"):
        refused = _call(router, path, {})
        assert refused.status == 403
        assert b"This API is restricted, expecting header 'admin'" in refused.body
        assert _call(router, path, {"admin": "wrong"}).status == 403
        assert _call(router, path, {"admin": "s3cret"}) is ok
    assert _call(router, "/v2", {}) is ok  # metadata is not restricted


def test_an_unrestricted_router_serves_the_handler_itself() -> None:
    router = Router()

    def handler(request, params):
        return HttpResponse(200, b"", None)

    router.add("GET", "/v2/health/live", handler)
    assert router.match("GET", "/v2/health/live").handler is handler


def test_restrictions_are_checked_before_any_work_in_the_http_protocol() -> None:
    from tests.unit.test_http_protocol import Harness, parse_responses, settle

    async def scenario() -> None:
        h = Harness()
        h.router.restrict(RestrictedApis.parse(["inference:infer-key=s3cret"], "--x"))
        h.feed(b"POST /v2/models/ident/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        await settle()
        ((status, _, body),) = parse_responses(h.transport.data)
        assert status == 403 and b"infer-key" in body

    asyncio.run(scenario())
