"""Triton's shared-memory extension over HTTP: ``/v2/systemsharedmemory/...`` and
``/v2/cudasharedmemory/...`` status, register and unregister."""

from __future__ import annotations

from functools import partial

import orjson

from tritium.core.errors import InvalidArgument, TritiumError
from tritium.frontends.http.messages import (
    EMPTY_OK,
    HttpRequest,
    HttpResponse,
    from_error,
    internal_error,
    json_response,
)
from tritium.frontends.http.router import Params, Router
from tritium.service.api import ServiceApi

_UINT64_MAX = 2**64 - 1


def _register_body(body: bytes, fields: tuple[str, ...]) -> dict:
    """The JSON object of a register request, with Triton's texts for missing fields."""
    try:
        doc = orjson.loads(body) if body else None
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"failed to parse the request JSON buffer: {exc}") from None
    if type(doc) is not dict:
        raise InvalidArgument("Shared memory register request must be a JSON object")
    for key in fields:
        if key not in doc:
            raise InvalidArgument(f"Shared memory register request has no '{key}' field")
    return doc


def _uint(doc: dict, key: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if type(value) is not int or not 0 <= value <= _UINT64_MAX:
        raise InvalidArgument(
            f"Unable to parse '{key}': attempt to access JSON non-unsigned-integer as "
            "unsigned-integer"
        )
    return value


class SharedMemoryRoutes:
    """``/v2/systemsharedmemory/...`` and ``/v2/cudasharedmemory/...``, as Triton serves
    them: status answers a JSON list, register and unregister an empty 200."""

    def __init__(self, service: ServiceApi) -> None:
        self._service = service

    def register(self, router: Router) -> None:
        add = router.add
        for kind in ("systemsharedmemory", "cudasharedmemory"):
            cuda = kind == "cudasharedmemory"
            base = f"/v2/{kind}"
            add("GET", base + "/status", partial(self.status, cuda))
            add("GET", base + "/region/{region}/status", partial(self.status, cuda))
            add("POST", base + "/region/{region}/register", partial(self.register_region, cuda))
            add("POST", base + "/unregister", partial(self.unregister, cuda))
            add("POST", base + "/region/{region}/unregister", partial(self.unregister, cuda))

    def _shm(self) -> ServiceApi:
        return self._service

    def status(self, cuda: bool, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            service = self._shm()
            name = params.get("region", "")
            found = service.cuda_shm_status(name) if cuda else service.shm_status(name)
            return json_response(found)
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "shared memory status")

    def register_region(self, cuda: bool, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            service = self._shm()
            name = params["region"]
            if cuda:
                # No CUDA runtime: the call can never succeed, whatever the body holds.
                service.cuda_shm_register(name, b"", 0, 0)
                return EMPTY_OK
            doc = _register_body(request.body, ("key", "byte_size"))
            key = doc["key"]
            if type(key) is not str:
                raise InvalidArgument(
                    "Unable to parse 'key': attempt to access JSON non-string as string"
                )
            service.shm_register(name, key, _uint(doc, "offset", 0), _uint(doc, "byte_size"))
            return EMPTY_OK
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "shared memory register")

    def unregister(self, cuda: bool, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            service = self._shm()
            name = params.get("region", "")
            if cuda:
                service.cuda_shm_unregister(name)
            else:
                service.shm_unregister(name)
            return EMPTY_OK
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "shared memory unregister")
