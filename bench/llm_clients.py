"""Streaming clients for the LLM load tool, one per API, each timing every token it reads.

- ``openai``: ``POST /v1/completions`` with ``stream: true`` (SSE, ``data: [DONE]``);
- ``generate_stream``: Triton's ``POST /v2/models/<m>/generate_stream`` (SSE);
- ``grpc_stream``: ``ModelStreamInfer`` on one bidirectional stream per concurrent user,
  asking for Triton's empty final response to know where each request ends.

All three send the same prompt and ``max_tokens`` to a model with the conventions of
Triton's vLLM model (``text_input``, ``stream``, ``sampling_parameters``); a token is a
response (event) carrying text. Clients are lean on purpose (a minimal HTTP/1.1 reader, raw
protobufs on grpc.aio, no per-token objects beyond a timestamp) so that on a small machine the load generator costs
the servers under test as little CPU as possible, and the same for every server.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

APIS = ("openai", "generate_stream", "grpc_stream")


@dataclass(slots=True)
class Sample:
    """One request as the client saw it (seconds, from ``time.perf_counter``)."""

    start: float
    token_times: list[float] = field(default_factory=list)
    end: float = 0.0
    error: str = ""

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.start

    @property
    def itls(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:])]


#: A connected user: ``await send(prompt)`` runs one request to its end.
Send = Callable[[str], Awaitable[Sample]]


class Client:
    """The connections of one load run against one API of one server."""

    def __init__(self, api: str, url: str, model: str, max_tokens: int) -> None:
        if api not in APIS:
            raise ValueError(f"unknown API {api!r}; choose from {', '.join(APIS)}")
        self.api = api
        self.url = url
        self.model = model
        self.max_tokens = max_tokens
        self._closers: list[Callable[[], Awaitable[None]]] = []

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for close in self._closers:
            await close()

    async def user(self) -> Send:
        """A new concurrent user: its own keep-alive connection (its own stream, for gRPC)."""
        if self.api == "openai":
            body = {"model": self.model, "max_tokens": self.max_tokens, "stream": True}
            return await self._sse_user("/v1/completions", body, "prompt", _openai_token)
        if self.api == "generate_stream":
            body = {
                "stream": True,
                "exclude_input_in_output": True,
                "sampling_parameters": json.dumps({"max_tokens": self.max_tokens}),
            }
            path = f"/v2/models/{self.model}/generate_stream"
            return await self._sse_user(path, body, "text_input", _generate_token)
        return await self._grpc_user()

    # ---------------------------------------------------------------- HTTP (SSE)

    async def _sse_user(
        self, path: str, fixed: dict, prompt_field: str, is_token: Callable[[bytes], bool]
    ) -> Send:
        """A minimal HTTP/1.1 client: one connection, one request at a time, chunked SSE
        bodies split into events (a library client costs more CPU per event than the
        servers do on these machines)."""
        import asyncio

        host, port = self.url.rsplit(":", 1)
        streams: list = []
        clock = time.perf_counter
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            if not streams:
                streams.append(await asyncio.open_connection(host, int(port)))
            return streams[0]

        async def close() -> None:
            if streams:
                streams.pop()[1].close()

        self._closers.append(close)

        async def send(prompt: str) -> Sample:
            reader, writer = await connect()
            body = orjson.dumps({**fixed, prompt_field: prompt})
            sample = Sample(clock())
            times = sample.token_times
            writer.write(b"%sContent-Length: %d\r\n\r\n%s" % (head.encode(), len(body), body))
            try:
                status_and_headers = (await reader.readuntil(b"\r\n\r\n")).lower()
                if not status_and_headers.startswith(b"http/1.1 200"):
                    sample.error = status_and_headers.split(b"\r\n", 1)[0].decode()
                    await close()
                    return sample
                pending = b""
                if b"transfer-encoding: chunked" in status_and_headers:
                    while True:
                        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                        data = await reader.readexactly(size + 2)
                        if size == 0:
                            break
                        pending += data[:-2]
                        while b"\n\n" in pending:
                            event, pending = pending.split(b"\n\n", 1)
                            if is_token(event):
                                times.append(clock())
                else:  # a body that ends with the connection
                    while data := await reader.read(65536):
                        pending += data
                        while b"\n\n" in pending:
                            event, pending = pending.split(b"\n\n", 1)
                            if is_token(event):
                                times.append(clock())
                    await close()
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                sample.error = f"{type(exc).__name__}: {exc}"
                await close()
            sample.end = clock()
            return sample

        return send

    # ---------------------------------------------------------------- gRPC

    async def _grpc_user(self) -> Send:
        import asyncio

        import grpc
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        channel = grpc.aio.insecure_channel(self.url)
        self._closers.append(channel.close)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        call = stub.ModelStreamInfer()
        lock = asyncio.Lock()
        sampling = json.dumps({"max_tokens": self.max_tokens}).encode()
        clock = time.perf_counter

        def request(prompt: str) -> service_pb2.ModelInferRequest:
            r = service_pb2.ModelInferRequest(model_name=self.model)
            r.parameters["triton_enable_empty_final_response"].bool_param = True
            for name, datatype, raw in (
                ("text_input", "BYTES", _bytes_element(prompt.encode())),
                ("stream", "BOOL", b"\x01"),
                ("exclude_input_in_output", "BOOL", b"\x01"),
                ("sampling_parameters", "BYTES", _bytes_element(sampling)),
            ):
                tensor = r.inputs.add(name=name, datatype=datatype)
                tensor.shape.append(1)
                r.raw_input_contents.append(raw)
            return r

        async def send(prompt: str) -> Sample:
            async with lock:  # one request at a time on this user's stream
                sample = Sample(clock())
                times = sample.token_times
                await call.write(request(prompt))
                while True:
                    reply = await call.read()
                    if reply is grpc.aio.EOF:
                        sample.error = "stream closed"
                        break
                    if reply.error_message:
                        sample.error = reply.error_message[:200]
                        break
                    response = reply.infer_response
                    if response.raw_output_contents or response.outputs:
                        times.append(clock())
                    if response.parameters["triton_final_response"].bool_param:
                        break
                sample.end = clock()
                return sample

        return send


def _bytes_element(data: bytes) -> bytes:
    """One BYTES element as raw tensor contents: a 4-byte little-endian length, the bytes."""
    return struct.pack("<I", len(data)) + data


def _openai_token(event: bytes) -> bool:
    if not event.startswith(b"data: {"):
        return False  # data: [DONE]
    choices = orjson.loads(event[6:]).get("choices")
    return bool(choices) and bool(choices[0].get("text"))


def _generate_token(event: bytes) -> bool:
    return event.startswith(b"data: {") and bool(orjson.loads(event[6:]).get("text_output"))
