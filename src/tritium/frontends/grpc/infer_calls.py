"""Inference calls of the gRPC service, independent of any transport: ModelInfer
(submit now, finish from the scheduler's done callback) and ModelStreamInfer (one
submission per request, replies emitted in completion order), plus the one mapping of
handler exceptions to gRPC statuses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

from google.protobuf.message import DecodeError
from tritonclient.grpc import service_pb2

from tritium.core.completion import Completion
from tritium.core.errors import DecoupledRefused, TritiumError
from tritium.core.types import InferResponse
from tritium.frontends.grpc.infer_codec import decode_infer_request, encode_infer_response
from tritium.frontends.grpc.infer_plans import RequestPlans
from tritium.frontends.grpc.infer_response_bytes import (
    FINAL_RESPONSE_FIELD,
    SplitMessage,
    encode_infer_response_bytes,
    encode_infer_response_split,
    hit_response_bytes,
    stream_response_bytes,
    stream_response_split,
)
from tritium.frontends.grpc.open_streams import OpenStreams, StreamEndedAtShutdown, end_when_idle
from tritium.frontends.grpc.replays import ReplayKey
from tritium.frontends.grpc.status import INTERNAL, grpc_status_for
from tritium.service import DecoupledCall
from tritium.service.api import ServiceApi

logger = logging.getLogger("tritium.frontends.grpc")

#: Requests of one grpcio ModelStreamInfer call in flight or answered and not yet sent.
MAX_STREAM_BACKLOG = 1024

#: ``finish(result)`` turns the scheduler's result into the response message.
Finish = Callable[[Any], Any]


def call_status(exc: BaseException, what: str) -> tuple[int, str]:
    """(gRPC status code, client-safe message) for an exception raised by a handler.

    Unexpected exceptions are logged with their traceback and answer INTERNAL without it.
    """
    if isinstance(exc, TritiumError):
        return grpc_status_for(exc), exc.message
    logger.error("unexpected error in %s", what, exc_info=exc)
    return INTERNAL, f"internal error in {what}"


# ---------------------------------------------------------------------- infer


#: Triton's text for a unary ModelInfer on a decoupled model (UNIMPLEMENTED).
DECOUPLED_REFUSED = "ModelInfer RPC doesn't support models with decoupled transaction policy"


def submit_unary(service: ServiceApi, request: Any, trace: dict[str, str] | None) -> Completion:
    if trace is not None:
        request.trace_context = trace
    try:
        return service.submit(request)
    except DecoupledRefused as exc:
        raise DecoupledRefused(DECOUPLED_REFUSED) from exc


def _finish_infer(request_id: str, response: InferResponse) -> Any:
    if response.error is not None:
        raise response.error
    if response.encoded_forms is not None:  # a cache hit: bytes, which transports send as is
        return hit_response_bytes(response.encoded_forms, response, request_id)
    return encode_infer_response(response, request_id)


def begin_infer(
    service: ServiceApi,
    message: service_pb2.ModelInferRequest,
    trace: dict[str, str] | None = None,
) -> tuple[Completion, Finish]:
    """Decode and submit one ModelInfer request now (raises core errors at once);
    ``trace``: the trace context the call's metadata carried (``core.trace_context``).

    Cancelling the returned future drops the request if it is still queued.
    """
    request = decode_infer_request(message)
    future = submit_unary(service, request, trace)
    request_id = request.id
    return future, lambda response: _finish_infer(request_id, response)


def finish_infer_bytes(
    request_id: str, response: InferResponse, replay: ReplayKey | None = None
) -> bytes | SplitMessage:
    """The serialised answer to a settled ModelInfer; a response-cache hit files
    ``replay`` (its request's replay key)."""
    if response.error is not None:
        raise response.error
    return encode_infer_response_split(response, request_id, replay)


async def model_infer(
    service: ServiceApi, message: Any, trace: dict[str, str] | None = None
) -> service_pb2.ModelInferResponse:
    future, finish = begin_infer(service, message, trace)
    return finish(await future)


def stream_error(
    message: Any, text: str, final: bool = True
) -> service_pb2.ModelStreamInferResponse:
    """A stream reply for a failed request (a ``ModelInferRequest`` or the core request
    decoded from it): the id and model let a client match it; ``triton_final_response``
    says whether more replies follow for it, as in Triton."""
    reply = service_pb2.ModelStreamInferResponse(
        error_message=text,
        infer_response=service_pb2.ModelInferResponse(
            model_name=message.model_name, model_version=message.model_version, id=message.id
        ),
    )
    reply.infer_response.parameters["triton_final_response"].bool_param = final
    return reply


class InferStream:
    """One ModelStreamInfer call: every request is submitted as it arrives and answered
    by ``emit(reply)`` in completion order; a failed request answers ``error_message``
    and the stream goes on.

    ``on_idle`` (when set) is called each time the last pending request completes, so a
    transport can end the call once the client has half-closed and nothing is pending.

    With ``plans``, :meth:`push_bytes` takes serialised requests and the replies of
    successful requests are emitted serialised (``bytes``). ``trace`` (the trace context
    of the call's metadata) goes with every request of the stream.
    """

    __slots__ = (
        "_service",
        "_emit",
        "_plans",
        "_trace",
        "_pending",
        "_reply",
        "on_idle",
        "closed",
    )

    def __init__(
        self,
        service: ServiceApi,
        emit: Callable[[Any], None],
        plans: RequestPlans | None = None,
        trace: dict[str, str] | None = None,
    ) -> None:
        self._service = service
        self._emit = emit
        self._plans = plans
        self._trace = trace
        self._pending: set[Any] = set()
        self._reply = self._decoupled_reply  # bound once: passed with every request
        self.on_idle: Callable[[], None] | None = None
        self.closed = False

    @property
    def pending(self) -> int:
        """Requests submitted and not answered yet."""
        return len(self._pending)

    def push(self, message: service_pb2.ModelInferRequest) -> None:
        """Submit one request; its reply is emitted when it completes (a decoupled
        model's replies as the model sends them)."""
        try:
            request = decode_infer_request(message)
            request.trace_context = self._trace
            future = self._service.submit(request, self._reply)
        except Exception as exc:
            self._emit(_stream_failure(message, exc))
            return
        self._pending.add(future)
        if type(future) is DecoupledCall:
            return
        request_id = request.id
        future.add_done_callback(
            lambda done: self._done(message, partial(_finish_infer, request_id), done)
        )

    def push_bytes(self, data: bytes | memoryview) -> None:
        """Submit one serialised request (needs ``plans``); malformed bytes raise
        protobuf's ``DecodeError``."""
        try:
            request = self._plans.decode(data)  # type: ignore[union-attr]
        except DecodeError:
            raise
        except Exception as exc:
            # The reply names the request's model and id.
            self._emit(_stream_failure(service_pb2.ModelInferRequest.FromString(data), exc))
            return
        request.trace_context = self._trace
        try:
            future = self._service.submit(request, self._reply)
        except Exception as exc:
            self._emit(_stream_failure(request, exc))
            return
        self._pending.add(future)
        if type(future) is not DecoupledCall:
            future.add_done_callback(partial(self._done_bytes, request))

    def _decoupled_reply(
        self, call: DecoupledCall, response: InferResponse | None, final: bool
    ) -> None:
        """One response of a decoupled model's request, as Triton's stream writes it:
        every reply says ``triton_final_response``; a final mark without a response is
        an empty reply only when the request asked for it."""
        if final:
            self._pending.discard(call)
        if not self.closed:
            request = call.request
            if response is not None and response.error is not None:
                _, text = call_status(response.error, "stream inference")
                reply: Any = stream_error(request, text, final)
            elif response is not None or request.empty_final:
                if response is None:  # names the model and version as the request did
                    response = InferResponse(request.model_name, request.model_version, request.id)
                if self._plans is None:  # a transport that sends message objects
                    response.parameters["triton_final_response"] = final
                    reply = service_pb2.ModelStreamInferResponse(
                        infer_response=encode_infer_response(response, request.id)
                    )
                elif response.parameters:
                    response.parameters["triton_final_response"] = final
                    reply = stream_response_bytes(
                        encode_infer_response_bytes(response, request.id)
                    )
                else:
                    # The usual case: the fast encoding, with the parameter's field
                    # appended (protobuf fields may come in any order).
                    reply = stream_response_split(
                        encode_infer_response_split(response, request.id),
                        FINAL_RESPONSE_FIELD[final],
                    )
            else:
                reply = None
            if reply is not None:
                self._emit(reply)
        if final and not self._pending and self.on_idle is not None:
            self.on_idle()

    def _done_bytes(self, request: Any, done: Completion) -> None:
        """:meth:`_done` for a request pushed as bytes: the reply is emitted as bytes."""
        self._pending.discard(done)
        if self.closed or done.cancelled():
            return
        try:
            reply: Any = stream_response_split(
                finish_infer_bytes(request.id, done.result()), FINAL_RESPONSE_FIELD[True]
            )
        except Exception as exc:
            reply = _stream_failure(request, exc)
        self._emit(reply)
        if not self._pending and self.on_idle is not None:
            self.on_idle()

    def _done(self, message: Any, finish: Finish, done: Completion) -> None:
        self._pending.discard(done)
        if self.closed or done.cancelled():
            return
        try:
            result = finish(done.result())
            if type(result) is bytes:
                reply: Any = stream_response_bytes(result, FINAL_RESPONSE_FIELD[True])
            else:
                reply = service_pb2.ModelStreamInferResponse(infer_response=result)
                reply.infer_response.parameters["triton_final_response"].bool_param = True
        except Exception as exc:
            reply = _stream_failure(message, exc)
        self._emit(reply)
        if not self._pending and self.on_idle is not None:
            self.on_idle()

    def cancel(self) -> None:
        """Drop every pending request (the client went away); nothing more is emitted."""
        self.closed = True
        for future in list(self._pending):
            future.cancel()
        self._pending.clear()


def _stream_failure(message: Any, exc: BaseException) -> service_pb2.ModelStreamInferResponse:
    _, text = call_status(exc, "stream inference")
    return stream_error(message, text)


#: Reply bytes one grpcio ModelStreamInfer call may hold for a client that is not reading
#: them (a decoupled model keeps producing); past it the call ends RESOURCE_EXHAUSTED.
MAX_STREAM_REPLY_BYTES = 64 << 20


class StreamBacklogExceeded(Exception):
    """The client of a stream stopped reading while its responses kept coming."""


async def model_stream_infer(
    service: ServiceApi,
    requests: AsyncIterator[service_pb2.ModelInferRequest],
    trace: dict[str, str] | None = None,
    open_streams: OpenStreams | None = None,
) -> AsyncIterator[service_pb2.ModelStreamInferResponse]:
    """ModelStreamInfer over async iterators (for transports that hand out iterators).

    At most :data:`MAX_STREAM_BACKLOG` requests are in flight or answered but not yet
    taken by the transport; past that, no further request is read until the client
    takes its replies. Replies waiting for the client are capped at
    :data:`MAX_STREAM_REPLY_BYTES`: past that, every request of the stream is cancelled
    and :class:`StreamBacklogExceeded` ends the call. In ``open_streams``, it is ended at
    shutdown once no request of it is pending (:class:`StreamEndedAtShutdown`)."""
    loop = asyncio.get_running_loop()
    replies: asyncio.Queue[service_pb2.ModelStreamInferResponse | None] = asyncio.Queue()
    waiting = [0]  # bytes of the replies in the queue
    overflow: list[bool] = []

    def emit(reply: service_pb2.ModelStreamInferResponse) -> None:
        if overflow:
            return
        waiting[0] += reply.ByteSize()
        if waiting[0] > MAX_STREAM_REPLY_BYTES:
            overflow.append(True)
            stream.cancel()
            while not replies.empty():  # dropped: the call ends with an error anyway
                replies.get_nowait()
            replies.put_nowait(None)
            return
        replies.put_nowait(reply)

    stream = InferStream(service, emit, trace=trace)
    finished = loop.create_future()
    room: list[asyncio.Future] = []  # the reader's wait for the backlog to shrink

    def idle() -> None:
        if not finished.done():
            finished.set_result(None)

    async def read() -> None:
        try:
            async for message in requests:
                while stream.pending + replies.qsize() >= MAX_STREAM_BACKLOG:
                    room.append(loop.create_future())
                    await room[-1]
                stream.push(message)
            if stream.pending:
                stream.on_idle = idle
                await finished
        finally:
            replies.put_nowait(None)

    reader = asyncio.ensure_future(read())
    ended: list[bool] = []  # by the server's shutdown

    def end_now() -> None:
        if not ended:
            ended.append(True)
            reader.cancel()
            replies.put_nowait(None)

    streams = open_streams if open_streams is not None else OpenStreams()
    streams.add(ending := partial(end_when_idle, stream, end_now))
    try:
        while (reply := await replies.get()) is not None:
            waiting[0] -= reply.ByteSize()
            while room:
                waiter = room.pop()
                if not waiter.done():
                    waiter.set_result(None)
            yield reply
        if overflow:
            raise StreamBacklogExceeded(
                f"stream reset: more than {MAX_STREAM_REPLY_BYTES >> 20} MiB of responses "
                "were waiting for the client to read them"
            )
        if ended:
            raise StreamEndedAtShutdown("Server is shutting down")
        await reader  # surfaces a broken request stream
    finally:
        streams.discard(ending)
        reader.cancel()
        stream.cancel()
