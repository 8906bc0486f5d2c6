"""The KServe v2 endpoints: parse, call the service, encode, map errors.

Status codes and bodies follow Triton's HTTP endpoint: health answers 200 or 400 with
an empty body; an unknown or unready model's ``/ready`` answers 400 "Model version not
ready"; every other error is ``{"error": "<message>"}`` with the status of its code.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from tritium.core.errors import NotFound, TritiumError
from tritium.frontends.http.compression import (
    compress,
    decompress,
    request_encoding,
    response_encoding,
)
from tritium.frontends.http.infer_decode import (
    OutputPrefs,
    decode_infer_request,
    decode_raw_request,
    parse_header_length,
)
from tritium.frontends.http.infer_encode import ClassificationContext, encode_infer_response
from tritium.frontends.http.messages import (
    CONTENT_BINARY,
    CONTENT_JSON,
    CONTENT_TEXT,
    EMPTY_OK,
    DeferredResponse,
    HttpRequest,
    HttpResponse,
    error_response,
    from_error,
    json_response,
)
from tritium.frontends.http.router import Params, Router
from tritium.frontends.http.service_api import ClassificationLabels, InferenceService

logger = logging.getLogger("tritium.frontends.http")

_NOT_READY_EMPTY = HttpResponse(400, b"", CONTENT_TEXT)
_MODEL_NOT_READY = error_response(400, "Model version not ready", CONTENT_TEXT)
_ACCEPT_ENCODING = [(b"Accept-Encoding", b"gzip, deflate")]


def _internal(exc: BaseException, what: str) -> HttpResponse:
    # Tracebacks go to the log, never to the client.
    logger.error("unexpected error in %s", what, exc_info=exc)
    return error_response(500, f"internal error in {what}")


class KServeRoutes:
    """Handlers for the v2 health, metadata, config and infer endpoints."""

    def __init__(self, service: InferenceService, max_input_size: int) -> None:
        self._service = service
        self._max_input_size = max_input_size

    def register(self, router: Router) -> None:
        add = router.add
        add("GET", "/v2", self.server_metadata)
        add("GET", "/v2/health/live", self.health_live)
        add("GET", "/v2/health/ready", self.health_ready)
        for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version:int}"):
            add("GET", base, self.model_metadata)
            add("GET", base + "/ready", self.model_ready)
            add("GET", base + "/config", self.model_config)
            add("POST", base + "/infer", self.infer)
            add("GET", base + "/stats", self.model_statistics)
        add("GET", "/v2/models/stats", self.model_statistics)

    # ------------------------------------------------------------ server

    def server_metadata(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return json_response(self._service.server_metadata())
        except TritiumError as exc:
            return from_error(exc)

    def health_live(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return EMPTY_OK if self._service.live() else _NOT_READY_EMPTY
        except TritiumError:
            return _NOT_READY_EMPTY

    def health_ready(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return EMPTY_OK if self._service.ready() else _NOT_READY_EMPTY
        except TritiumError:
            return _NOT_READY_EMPTY

    # ------------------------------------------------------------- model

    def model_metadata(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return json_response(
                self._service.model_metadata(params["model"], params.get("version", ""))
            )
        except TritiumError as exc:
            return from_error(exc)

    def model_config(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return json_response(
                self._service.model_config(params["model"], params.get("version", ""))
            )
        except TritiumError as exc:
            return from_error(exc)

    def model_ready(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            ready = self._service.model_ready(params["model"], params.get("version", ""))
        except NotFound:
            # Triton answers an unknown model exactly like an unready one.
            return _MODEL_NOT_READY
        except TritiumError as exc:
            return from_error(exc, CONTENT_TEXT)
        return EMPTY_OK if ready else _MODEL_NOT_READY

    def model_statistics(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return json_response(
                self._service.model_statistics(params.get("model", ""), params.get("version", ""))
            )
        except TritiumError as exc:
            return from_error(exc)

    # ------------------------------------------------------------- infer

    def infer(self, request: HttpRequest, params: Params) -> HttpResponse | DeferredResponse:
        """Decode and submit now; the response is encoded when the model answers."""
        model = params["model"]
        version = params.get("version", "")
        service = self._service
        body = request.body
        encoding = request.headers.get("content-encoding")
        compressed = None
        if encoding is not None:
            try:
                compressed = request_encoding(encoding)
            except TritiumError as exc:
                # Tell the client which encodings it may use instead.
                reply = from_error(exc)
                reply.headers = _ACCEPT_ENCODING
                return reply
        try:
            if compressed is not None:
                body = decompress(body, compressed, self._max_input_size)
            header_length = parse_header_length(
                request.headers.get("inference-header-content-length"), len(body)
            )
            if header_length:
                infer_request, prefs = decode_infer_request(model, version, body, header_length)
            else:
                config = service.model_config(model, version)
                infer_request, prefs = decode_raw_request(model, version, body, config)
            done = service.submit(infer_request)
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return _internal(exc, "inference")
        return DeferredResponse(
            done,
            partial(
                self._encode, model, version, infer_request.id, prefs,
                request.headers.get("accept-encoding"),
            ),
        )

    def _encode(
        self,
        model: str,
        version: str,
        request_id: str,
        prefs: OutputPrefs,
        accept: str | None,
        done: asyncio.Future,
    ) -> HttpResponse:
        try:
            response = done.result()
            if response.error is not None:
                raise response.error
            classification = None
            if prefs.wants_classification:
                classification = self._classification(model, response.model_version or version)
            chunks, json_length = encode_infer_response(
                response, prefs, request_id=request_id, classification=classification
            )
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return _internal(exc, "inference")
        headers: list[tuple[bytes, bytes]] = []
        if json_length is None:
            content_type = CONTENT_JSON
        else:
            content_type = CONTENT_BINARY
            headers.append((b"Inference-Header-Content-Length", b"%d" % json_length))
        if accept is not None:
            chosen = response_encoding(accept)
            if chosen is not None:
                chunks = [compress(b"".join(chunks), chosen)]
                headers.append((b"Content-Encoding", chosen.encode()))
        return HttpResponse(200, chunks, content_type, headers or None)

    def _classification(self, model: str, version: str) -> ClassificationContext:
        config = self._service.model_config(model, version)
        batched = int(config.get("max_batch_size", 0) or 0) > 0
        service = self._service
        if isinstance(service, ClassificationLabels):
            return ClassificationContext(
                batched, lambda output: service.output_labels(model, version, output)
            )
        return ClassificationContext(batched)
