"""The KServe v2 endpoints: parse, call the service, encode, map errors. The other
route groups (shared memory, repository, observability, generate) are registered from
here and live in their own modules.

Status codes and bodies follow Triton's HTTP endpoint: health answers 200 or 400 with
an empty body (except that a 400 from ``/v2/health/ready`` says why the server is not
ready, where Triton says nothing); an unknown or unready model's ``/ready`` answers 400
"Model version not ready"; every other error is ``{"error": "<message>"}`` with the status
of its code.
"""

from __future__ import annotations

from collections.abc import Awaitable
from functools import partial

from tritium.core.completion import Completion
from tritium.core.errors import (
    DecoupledRefused,
    InvalidArgument,
    NotFound,
    TritiumError,
    Unsupported,
)
from tritium.core.trace_context import TRACEPARENT, propagated
from tritium.core.types import EncodedForms, InferResponse
from tritium.frontends.http.compression import (
    compress,
    decompress,
    request_encoding,
    response_encoding,
)
from tritium.frontends.http.generate import GenerateRoutes
from tritium.frontends.http.infer_decode import decode_infer_request, parse_header_length
from tritium.frontends.http.infer_encode import BigJsonOutput, encode_infer_response
from tritium.frontends.http.messages import (
    CONTENT_BINARY,
    CONTENT_JSON,
    CONTENT_TEXT,
    EMPTY_OK,
    INFER_HEADER_LENGTH,
    DeferredResponse,
    HttpRequest,
    HttpResponse,
    error_response,
    from_error,
    internal_error,
    json_response,
)
from tritium.frontends.http.observability import ObservabilityRoutes
from tritium.frontends.http.output_prefs import OutputPrefs
from tritium.frontends.http.raw_request import decode_raw_request
from tritium.frontends.http.replays import Replays
from tritium.frontends.http.repository_routes import RepositoryRoutes
from tritium.frontends.http.reused_bodies import (
    REPLAY_BYTES,
    Body,
    ReplayKey,
    form_key,
    keep_body,
    replay_key,
    reused_body,
)
from tritium.frontends.http.router import Params, Router
from tritium.frontends.http.shared_memory_routes import SharedMemoryRoutes
from tritium.frontends.offload import OFFLOAD_BYTES, off_loop
from tritium.service.api import ServiceApi

#: Triton's text for ``/infer`` on a decoupled model (501); ``generate_stream`` serves them.
DECOUPLED_REFUSED = "HTTP end point doesn't support models with decoupled transaction policy"

_NOT_READY_EMPTY = HttpResponse(400, b"", CONTENT_TEXT)
# Triton 2.51 says text/plain for this JSON body; tritium says what the body is.
_MODEL_NOT_READY = error_response(400, "Model version not ready")
_ACCEPT_ENCODING = [(b"Accept-Encoding", b"gzip, deflate")]


def _raw_body(length: str | None) -> bool:
    """Whether ``Inference-Header-Content-Length`` says the body is one raw tensor."""
    if length is None:
        return False
    try:
        return parse_header_length(length, 2**63) == 0
    except InvalidArgument:
        return False


async def _compressed_off_loop(
    body: bytes, encoding: str, content_type: bytes | None, headers: list[tuple[bytes, bytes]]
) -> HttpResponse:
    return HttpResponse(200, [await off_loop(compress, body, encoding)], content_type, headers)


class KServeRoutes:
    """Handlers for the v2 health, metadata, config and infer endpoints."""

    def __init__(self, service: ServiceApi, max_input_size: int) -> None:
        self._service = service
        self._max_input_size = max_input_size
        self._replays = Replays(service)

    def register(self, router: Router) -> None:
        add = router.add
        add("GET", "/v2", self.server_metadata)
        add("GET", "/v2/health/live", self.health_live)
        add("GET", "/v2/health/ready", self.health_ready)
        for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version:int}"):
            add("GET", base, self.model_metadata)
            add("GET", base + "/ready", self.model_ready)
            add("GET", base + "/config", self.model_config)
            add("POST", base + "/infer", self.infer, self._replays.quick)
            add("GET", base + "/stats", self.model_statistics)
        add("GET", "/v2/models/stats", self.model_statistics)
        SharedMemoryRoutes(self._service).register(router)
        ObservabilityRoutes(self._service).register(router)
        RepositoryRoutes(self._service).register(router)
        GenerateRoutes(self._service).register(router)

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
        service = self._service
        try:
            if service.ready():
                return EMPTY_OK
            # Triton's status with an empty body; tritium says which model and why.
            return error_response(400, service.not_ready_reason())
        except TritiumError:
            pass
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
            return from_error(exc)
        return EMPTY_OK if ready else _MODEL_NOT_READY

    def model_statistics(self, request: HttpRequest, params: Params) -> HttpResponse:
        try:
            return json_response(
                self._service.model_statistics(params.get("model", ""), params.get("version", ""))
            )
        except TritiumError as exc:
            return from_error(exc)

    # ------------------------------------------------------------- infer

    def infer(
        self, request: HttpRequest, params: Params
    ) -> HttpResponse | DeferredResponse | Awaitable[HttpResponse]:
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
        if len(body) >= OFFLOAD_BYTES:
            return self._infer_off_loop(request, model, version, compressed)
        accept = request.headers.get("accept-encoding")
        replayable = (
            len(body) <= REPLAY_BYTES
            and compressed is None
            and accept is None
            and TRACEPARENT not in request.headers
        )
        keyed: ReplayKey | None = None
        if replayable and model in self._replays.models:
            keyed = replay_key(
                model, version, body, request.headers.get("inference-header-content-length")
            )
            if keyed is not None:
                replayed = self._replays.body(model, version, keyed)
                if replayed is not None:
                    return _answer(*replayed)
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
            if TRACEPARENT in request.headers:
                infer_request.trace_context = propagated(request.headers)
            done = service.submit(infer_request)
        except Exception as exc:
            return _infer_error(exc)
        if done.done() and not done.cancelled():
            # Answered already (a response-cache hit): no deferral, no callbacks.
            if replayable and keyed is None:
                keyed = replay_key(
                    model, version, body, request.headers.get("inference-header-content-length")
                )
            if keyed is not None and keyed.request_id != infer_request.id:
                keyed = None  # an id the key does not see (a second "id" member)
            if keyed is not None:
                self._replays.models.add(model)
            return self._encode(infer_request.id, prefs, accept, done, replay=keyed)
        return DeferredResponse(done, partial(self._encode, infer_request.id, prefs, accept))

    async def _infer_off_loop(
        self, request: HttpRequest, model: str, version: str, compressed: str | None
    ) -> HttpResponse:
        """``infer`` for a big body: decoding and encoding run on an offload thread."""
        service = self._service
        try:
            config = None
            if _raw_body(request.headers.get("inference-header-content-length")):
                config = service.model_config(model, version)  # a raw body needs it
            infer_request, prefs = await off_loop(
                self._decode_big, model, version, request, compressed, config
            )
            infer_request.trace_context = propagated(request.headers)
            done = service.submit(infer_request)
        except Exception as exc:
            return _infer_error(exc)
        try:
            await done
        except Exception:  # noqa: BLE001 - _encode reports it from the completion
            pass
        encode = partial(
            self._encode,
            infer_request.id,
            prefs,
            request.headers.get("accept-encoding"),
            done,
            compress_here=True,
        )
        return await off_loop(encode)  # type: ignore[arg-type]  # compress_here: a response

    def _decode_big(
        self,
        model: str,
        version: str,
        request: HttpRequest,
        compressed: str | None,
        config: dict | None,
    ) -> tuple:
        body = request.body
        if compressed is not None:
            body = decompress(body, compressed, self._max_input_size)
        header_length = parse_header_length(
            request.headers.get("inference-header-content-length"), len(body)
        )
        if header_length:
            return decode_infer_request(model, version, body, header_length, cache=False)
        assert config is not None  # _raw_body said so on the loop
        return decode_raw_request(model, version, body, config)

    def _encode(
        self,
        request_id: str,
        prefs: OutputPrefs,
        accept: str | None,
        done: Completion,
        compress_here: bool = False,
        replay: ReplayKey | None = None,
    ) -> HttpResponse | Awaitable[HttpResponse]:
        """The answer to a settled infer; ``replay`` (a hit's replay key) is filed with the
        cache entry that answered it."""
        try:
            response = done.result()
            if response.error is not None:
                raise response.error
            forms = response.encoded_forms
            if forms is None:
                chunks, json_length = encode_infer_response(
                    response, prefs, request_id=request_id, on_loop=not compress_here
                )
            else:
                chunks, json_length = _hit_body(
                    forms, response, prefs, response.id or request_id, compress_here, replay
                )
        except BigJsonOutput:
            # A small request with a huge JSON answer: its text is written on a thread.
            # On a thread, with compress_here: always a response, never an awaitable.
            return off_loop(self._encode, request_id, prefs, accept, done, True)  # type: ignore[arg-type]
        except TritiumError as exc:
            return from_error(exc)
        except Exception as exc:
            return internal_error(exc, "inference")
        answer = _answer(chunks, json_length)
        chosen = None if accept is None else response_encoding(accept)
        if chosen is None:
            return answer
        headers = [*(answer.headers or ()), (b"Content-Encoding", chosen.encode())]
        body = b"".join(chunks)
        if len(body) >= OFFLOAD_BYTES and not compress_here:
            return _compressed_off_loop(body, chosen, answer.content_type, headers)
        answer.body, answer.headers = [compress(body, chosen)], headers
        return answer


def _answer(chunks: list[bytes | memoryview], json_length: int | None) -> HttpResponse:
    """A successful infer's answer, uncompressed: JSON, or binary after a JSON header."""
    if json_length is None:
        return HttpResponse(200, chunks, CONTENT_JSON, None)
    return HttpResponse(
        200,
        chunks,
        CONTENT_BINARY,
        [(INFER_HEADER_LENGTH, b"%d" % json_length)],
    )


def _hit_body(
    forms: EncodedForms,
    response: InferResponse,
    prefs: OutputPrefs,
    rid: str,
    threaded: bool,
    replay: ReplayKey | None = None,
) -> Body:
    """The body of a response-cache hit: an earlier hit's bytes in the same form, else
    encoded now and kept for the next ones (kept only on the event loop, which owns the
    cache), and the request filed as a replay of that form."""
    key = form_key(response, prefs)
    body = reused_body(forms, key, rid)
    if body is None:
        body = encode_infer_response(response, prefs, request_id=rid, on_loop=not threaded)
        if not threaded:
            keep_body(forms, key, rid, body)
    if replay is not None:
        forms.keep_replay(replay.key, key, replay.nbytes)
    return body


def _infer_error(exc: Exception) -> HttpResponse:
    """The answer to an infer that failed before it was scheduled."""
    if isinstance(exc, DecoupledRefused):
        return from_error(Unsupported(DECOUPLED_REFUSED))
    if isinstance(exc, TritiumError):
        return from_error(exc)
    return internal_error(exc, "inference")
