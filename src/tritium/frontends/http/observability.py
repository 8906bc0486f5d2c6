"""Triton's logging and trace extensions over HTTP: ``/v2/logging``,
``/v2/trace/setting`` and ``/v2/models/{model}/trace/setting``.

Each route decodes the JSON body, calls the service's settings object and answers the
settings as JSON; errors keep Triton's status codes and texts.
"""

from __future__ import annotations

import orjson

from tritium.core.errors import InternalError, TritiumError
from tritium.frontends.http.messages import HttpRequest, HttpResponse, from_error, json_response
from tritium.frontends.http.router import Params, Router
from tritium.service.api import ServiceApi


def _body(request: HttpRequest) -> object:
    try:
        return orjson.loads(request.body) if request.body else {}
    except orjson.JSONDecodeError as exc:
        raise InternalError(f"failed to parse the request JSON buffer: {exc}") from None


class ObservabilityRoutes:
    def __init__(self, service: ServiceApi) -> None:
        self._service = service

    def register(self, router: Router) -> None:
        add = router.add
        add("GET", "/v2/logging", self.get_logging)
        add("POST", "/v2/logging", self.post_logging)
        add("GET", "/v2/trace/setting", self.get_trace)
        add("POST", "/v2/trace/setting", self.post_trace)
        add("GET", "/v2/models/{model}/trace/setting", self.get_trace)
        add("POST", "/v2/models/{model}/trace/setting", self.post_trace)

    def get_logging(self, request: HttpRequest, params: Params) -> HttpResponse:
        return json_response(self._service.log_settings.as_json())

    def post_logging(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            doc = _body(request)
            return json_response(self._service.log_settings.update(doc))
        except TritiumError as exc:
            return from_error(exc)

    def get_trace(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            traces = self._service.trace_settings
            return json_response(traces.get(params.get("model", "")))
        except TritiumError as exc:
            return from_error(exc)

    def post_trace(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            traces = self._service.trace_settings
            return json_response(traces.update(params.get("model", ""), _body(request)))
        except TritiumError as exc:
            return from_error(exc)
