"""Triton's model repository extension over HTTP: ``POST /v2/repository/index`` and
``POST /v2/repository/models/{model}/load|unload``.

The bodies are Triton's: index takes ``{"ready": bool}``; load takes ``{"parameters":
{"config": "<JSON>", "file:<path>": "<base64>"}}``; unload takes ``{"parameters":
{"unload_dependents": bool}}``; every body is optional. Success is an empty 200; errors are
``{"error": ...}`` with the status of their code.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from tritium.core.errors import InvalidArgument, TritiumError, Unsupported
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

_NAMED_REPOSITORY = "'repository_name' specification is not supported"


class RepositoryRoutes:
    def __init__(self, service: ServiceApi) -> None:
        self._service = service

    def register(self, router: Router) -> None:
        add = router.add
        add("POST", "/v2/repository/index", self.index)
        add("POST", "/v2/repository/models/{model}/load", self.load)
        add("POST", "/v2/repository/models/{model}/unload", self.unload)
        add("POST", "/v2/repository/{repository}/index", self.index)
        add("POST", "/v2/repository/{repository}/models/{model}/load", self.load)
        add("POST", "/v2/repository/{repository}/models/{model}/unload", self.unload)

    def _repository(self, params: Params) -> ServiceApi:
        if params.get("repository"):
            raise Unsupported(_NAMED_REPOSITORY)
        return self._service

    async def index(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            service = self._repository(params)
            body = _body(request.body)
            ready = body.get("ready", False)
            if type(ready) is not bool:
                raise InvalidArgument("attempt to access JSON non-boolean as boolean")
            return json_response(await service.repository_index(ready))
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "repository index")

    async def load(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            service = self._repository(params)
            parameters = _load_parameters(_body(request.body))
            await service.load_model(params["model"], parameters)
            return EMPTY_OK
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "model load")

    async def unload(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            service = self._repository(params)
            body_params = _body(request.body).get("parameters") or {}
            if not isinstance(body_params, dict):
                raise InvalidArgument("'parameters' must be a JSON object")
            dependents = body_params.get("unload_dependents", False)
            if type(dependents) is not bool:
                raise InvalidArgument(
                    "Unable to parse 'unload_dependents': attempt to access JSON "
                    "non-boolean as boolean"
                )
            await service.unload_model(params["model"], dependents)
            return EMPTY_OK
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "model unload")


def _body(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"failed to parse the request JSON buffer: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidArgument("the request body must be a JSON object")
    return doc


def _load_parameters(body: dict[str, Any]) -> dict[str, Any]:
    """Load parameters as the service takes them: strings, and file contents as bytes."""
    raw = body.get("parameters") or {}
    if not isinstance(raw, dict):
        raise InvalidArgument("'parameters' must be a JSON object")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(value, str):
            raise InvalidArgument(
                f"Unable to parse '{key}': attempt to access JSON non-string as string"
            )
        if key.startswith("file:"):
            try:
                out[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidArgument(
                    f"failed to decode the base64 content of load parameter '{key}'"
                ) from None
        else:
            out[key] = value
    return out
