"""The grpc.aio servicer: decode, call the :class:`Service`, encode, map errors.

Every method of ``GRPCInferenceService`` answers: the ones tritium does not serve yet
abort with UNIMPLEMENTED and say what is missing; unexpected exceptions become INTERNAL
with the traceback in the server log, never on the wire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tritium.core.errors import NotFound, TritiumError
from tritium.core.types import InferResponse
from tritium.frontends.grpc import shared_memory as shm
from tritium.frontends.grpc.infer_codec import decode_infer_request, encode_infer_response
from tritium.frontends.grpc.messages import (
    model_config_response,
    model_metadata_response,
    model_statistics_response,
    server_metadata_response,
)
from tritium.frontends.grpc.status import grpc_status_for
from tritium.service import Service

logger = logging.getLogger("tritium.frontends.grpc")

_STATUS_BY_VALUE: dict[int, grpc.StatusCode] = {s.value[0]: s for s in grpc.StatusCode}


def status_code(error: TritiumError) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` of a core error (via the one table in ``status``)."""
    return _STATUS_BY_VALUE[grpc_status_for(error)]


async def _abort(context: grpc.aio.ServicerContext, exc: BaseException, what: str) -> None:
    if isinstance(exc, TritiumError):
        await context.abort(status_code(exc), exc.message)
    logger.error("unexpected error in %s", what, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {what}")


def _unimplemented(what: str) -> Any:
    async def method(self: InferenceServicer, request: Any, context: Any) -> Any:
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED, f"{what} is not supported by this server yet"
        )

    return method


def _shm_call(call: Any) -> Any:
    """A servicer method for one of ``shared_memory``'s transport-neutral calls."""

    async def method(self: InferenceServicer, request: Any, context: Any) -> Any:
        try:
            return await call(self._service, request)
        except Exception as exc:
            await _abort(context, exc, call.__name__)

    return method


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Triton's ``inference.GRPCInferenceService`` over a transport-neutral Service."""

    def __init__(self, service: Service) -> None:
        self._service = service

    # ------------------------------------------------------------ health

    async def ServerLive(self, request: Any, context: Any) -> service_pb2.ServerLiveResponse:
        try:
            return service_pb2.ServerLiveResponse(live=self._service.live())
        except TritiumError:
            return service_pb2.ServerLiveResponse(live=False)

    async def ServerReady(self, request: Any, context: Any) -> service_pb2.ServerReadyResponse:
        try:
            return service_pb2.ServerReadyResponse(ready=self._service.ready())
        except TritiumError:
            return service_pb2.ServerReadyResponse(ready=False)

    async def ModelReady(self, request: Any, context: Any) -> service_pb2.ModelReadyResponse:
        try:
            ready = self._service.model_ready(request.name, request.version)
        except NotFound:
            ready = False  # Triton answers an unknown model like an unready one
        except Exception as exc:
            await _abort(context, exc, "ModelReady")
        return service_pb2.ModelReadyResponse(ready=ready)

    # ---------------------------------------------------------- metadata

    async def ServerMetadata(
        self, request: Any, context: Any
    ) -> service_pb2.ServerMetadataResponse:
        try:
            return server_metadata_response(self._service.server_metadata())
        except Exception as exc:
            await _abort(context, exc, "ServerMetadata")

    async def ModelMetadata(self, request: Any, context: Any) -> service_pb2.ModelMetadataResponse:
        try:
            return model_metadata_response(
                self._service.model_metadata(request.name, request.version)
            )
        except Exception as exc:
            await _abort(context, exc, "ModelMetadata")

    async def ModelConfig(self, request: Any, context: Any) -> service_pb2.ModelConfigResponse:
        try:
            return model_config_response(self._service.model_config(request.name, request.version))
        except Exception as exc:
            await _abort(context, exc, "ModelConfig")

    async def ModelStatistics(
        self, request: Any, context: Any
    ) -> service_pb2.ModelStatisticsResponse:
        try:
            return model_statistics_response(
                self._service.model_statistics(request.name, request.version)
            )
        except Exception as exc:
            await _abort(context, exc, "ModelStatistics")

    # ------------------------------------------------------------- infer

    async def _infer(
        self, message: service_pb2.ModelInferRequest
    ) -> service_pb2.ModelInferResponse:
        """Decode, submit, await and encode one request; raises core errors."""
        request = decode_infer_request(message)
        response: InferResponse = await self._service.submit(request)
        if response.error is not None:
            raise response.error
        return encode_infer_response(response, request.id)

    async def ModelInfer(self, request: Any, context: Any) -> service_pb2.ModelInferResponse:
        try:
            # A client that goes away cancels this task and with it the scheduler's
            # future, so the request is dropped if it is still queued.
            return await self._infer(request)
        except Exception as exc:
            await _abort(context, exc, "inference")

    async def ModelStreamInfer(
        self, request_iterator: AsyncIterator[service_pb2.ModelInferRequest], context: Any
    ) -> AsyncIterator[service_pb2.ModelStreamInferResponse]:
        """One response per request, in completion order; a failed request answers
        ``error_message`` and the stream goes on."""
        results: asyncio.Queue[service_pb2.ModelStreamInferResponse | None] = asyncio.Queue()
        pending: set[asyncio.Task] = set()

        async def one(message: service_pb2.ModelInferRequest) -> None:
            try:
                reply = service_pb2.ModelStreamInferResponse(
                    infer_response=await self._infer(message)
                )
            except TritiumError as exc:
                reply = _stream_error(message, exc.message)
            except asyncio.CancelledError:
                return
            except Exception as exc:
                logger.error("unexpected error in stream inference", exc_info=exc)
                reply = _stream_error(message, "internal error in inference")
            results.put_nowait(reply)

        async def read() -> None:
            try:
                async for message in request_iterator:
                    task = asyncio.ensure_future(one(message))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                if pending:
                    await asyncio.wait(set(pending))
            finally:
                results.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                reply = await results.get()
                if reply is None:
                    break
                yield reply
            await reader  # surfaces a broken request stream
        finally:
            reader.cancel()
            for task in list(pending):
                task.cancel()

    # ---------------------------------------------- not served yet

    RepositoryIndex = _unimplemented("the model repository extension (RepositoryIndex)")
    RepositoryModelLoad = _unimplemented("the model repository extension (RepositoryModelLoad)")
    RepositoryModelUnload = _unimplemented("the model repository extension (RepositoryModelUnload)")
    SystemSharedMemoryStatus = _shm_call(shm.system_shared_memory_status)
    SystemSharedMemoryRegister = _shm_call(shm.system_shared_memory_register)
    SystemSharedMemoryUnregister = _shm_call(shm.system_shared_memory_unregister)
    CudaSharedMemoryStatus = _shm_call(shm.cuda_shared_memory_status)
    CudaSharedMemoryRegister = _shm_call(shm.cuda_shared_memory_register)
    CudaSharedMemoryUnregister = _shm_call(shm.cuda_shared_memory_unregister)
    TraceSetting = _unimplemented("the trace extension (TraceSetting)")
    LogSettings = _unimplemented("the logging extension (LogSettings)")


def _stream_error(
    message: service_pb2.ModelInferRequest, text: str
) -> service_pb2.ModelStreamInferResponse:
    # The id and model let a client match the error to the request that caused it.
    return service_pb2.ModelStreamInferResponse(
        error_message=text,
        infer_response=service_pb2.ModelInferResponse(
            model_name=message.model_name, model_version=message.model_version, id=message.id
        ),
    )
