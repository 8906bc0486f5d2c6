"""The chaos tool's clients: each call sends requests of one kind, records them in the
ledger and reports every answer — HTTP/JSON unary (raw ``http.client``, so a dropped
connection is seen as such), gRPC unary, gRPC streams on a decoupled model (several
requests in flight on one stream, answers routed by request id), gRPC sequences, and the
faulty clients: deadlines that expire, disconnects mid-request and mid-stream, bursts past
a model's queue limit.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from bench.chaos_ledger import ABANDON, DEADLINE, Ledger, Outcome, Request

UNARY_DEADLINE_S = 10.0
STREAM_DEADLINE_S = 15.0


def _tensors(tag: int, delay_ms: int, count: int | None = None) -> list[grpcclient.InferInput]:
    batched = count is None
    shape = [1, 1] if batched else [1]
    inputs = [grpcclient.InferInput("TAG", shape, "INT64")]
    inputs[0].set_data_from_numpy(np.full(shape, tag, np.int64))
    if count is not None:
        inputs.append(grpcclient.InferInput("COUNT", shape, "INT32"))
        inputs[-1].set_data_from_numpy(np.full(shape, count, np.int32))
    inputs.append(grpcclient.InferInput("DELAY_MS", shape, "INT32"))
    inputs[-1].set_data_from_numpy(np.full(shape, delay_ms, np.int32))
    return inputs


def _grpc_error(exc: InferenceServerException) -> Outcome:
    status = str(exc.status())
    if status == "StatusCode.DEADLINE_EXCEEDED":
        return Outcome("deadline", status, exc.message() or "")
    if status == "StatusCode.CANCELLED":
        return Outcome("abandoned", status, exc.message() or "")
    return Outcome("error", status, exc.message() or "")


def _tag_of(result: object) -> int | None:
    tag = result.as_numpy("TAG")  # type: ignore[attr-defined]
    if tag is None:
        tag = result.as_numpy("ENS_TAG")  # type: ignore[attr-defined]
    return None if tag is None else int(tag.reshape(-1)[0])


# --------------------------------------------------------------------------- HTTP


class HttpUnary:
    """JSON infer over one keep-alive connection; reconnects after a failure."""

    def __init__(self, host: str, port: int, ledger: Ledger) -> None:
        self.host, self.port, self.ledger = host, port, ledger
        self._conn: http.client.HTTPConnection | None = None

    def call(self, model: str, delay_ms: int, deadline_s: float = UNARY_DEADLINE_S) -> None:
        request = self.ledger.open("http/unary", model, deadline_s)
        body = _json_body(request, delay_ms)
        try:
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=deadline_s)
            self._conn.request(
                "POST", f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"}
            )
            reply = self._conn.getresponse()
            data = reply.read()
        except TimeoutError:
            self._drop()
            self.ledger.final(request, Outcome("deadline"))
            return
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            self.ledger.final(request, Outcome("dropped", detail=repr(exc)))
            return
        self.ledger.final(request, *_http_outcome(request, reply.status, data))

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        self._drop()


def _json_body(request: Request, delay_ms: int) -> bytes:
    return json.dumps(
        {
            "id": str(request.id),
            "inputs": [
                {"name": "TAG", "shape": [1, 1], "datatype": "INT64", "data": [request.tag]},
                {"name": "DELAY_MS", "shape": [1, 1], "datatype": "INT32", "data": [delay_ms]},
            ],
        }
    ).encode()


def _http_outcome(request: Request, status: int, data: bytes) -> tuple[Outcome, int | None]:
    try:
        answer = json.loads(data)
    except ValueError:
        return Outcome("error", str(status), ""), None
    if status != 200:
        return Outcome("error", str(status), str(answer.get("error", ""))), None
    if answer.get("id") != str(request.id):
        return Outcome("ok"), -1  # judged as a wrong TAG: the answer is another request's
    return Outcome("ok"), int(answer["outputs"][0]["data"][0])


def http_disconnect(host: str, port: int, ledger: Ledger, model: str, delay_ms: int) -> None:
    """Send a request and close the connection before the answer can come."""
    request = ledger.open("http/disconnect", model, 1.0, ABANDON)
    body = _json_body(request, delay_ms)
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: chaos\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        with socket.create_connection((host, port), timeout=5) as conn:
            conn.sendall(head + body[: len(body) // 2])
            if random.random() < 0.5:  # half: the whole request, then leave mid-answer
                conn.sendall(body[len(body) // 2 :])
                time.sleep(delay_ms / 2000)
    except OSError:
        pass
    ledger.final(request, Outcome("abandoned"))


# --------------------------------------------------------------------------- gRPC


class GrpcUnary:
    def __init__(self, url: str, ledger: Ledger) -> None:
        self.client = grpcclient.InferenceServerClient(url)
        self.ledger = ledger

    def call(
        self,
        model: str,
        delay_ms: int,
        deadline_s: float = UNARY_DEADLINE_S,
        kind: str = "grpc/unary",
        expect: str = "answer",
    ) -> None:
        request = self.ledger.open(kind, model, deadline_s, expect)
        try:
            result = self.client.infer(
                model,
                _tensors(request.tag, delay_ms),
                request_id=str(request.id),
                client_timeout=deadline_s,
            )
        except InferenceServerException as exc:
            self.ledger.final(request, _grpc_error(exc))
            return
        self.ledger.final(request, Outcome("ok"), _tag_of(result))

    def sequence(self, corrid: int, steps: int) -> None:
        """One sequence of ``steps`` requests on chaos_seq."""
        for step in range(steps):
            request = self.ledger.open("grpc/sequence", "chaos_seq", UNARY_DEADLINE_S)
            tag = grpcclient.InferInput("TAG", [1, 1], "INT64")
            tag.set_data_from_numpy(np.full([1, 1], request.tag, np.int64))
            try:
                result = self.client.infer(
                    "chaos_seq",
                    [tag],
                    request_id=str(request.id),
                    sequence_id=corrid,
                    sequence_start=step == 0,
                    sequence_end=step == steps - 1,
                    client_timeout=UNARY_DEADLINE_S,
                )
            except InferenceServerException as exc:
                self.ledger.final(request, _grpc_error(exc))
                if step:  # the sequence is broken: end it so its slot frees at once
                    self._end(corrid)
                return
            got_step = int(result.as_numpy("STEP").reshape(-1)[0])
            if got_step != step + 1:
                self.ledger.note("sequence state lost (instance restarted or model reloaded)")
            self.ledger.final(request, Outcome("ok"), _tag_of(result))

    def _end(self, corrid: int) -> None:
        request = self.ledger.open("grpc/sequence", "chaos_seq", UNARY_DEADLINE_S)
        tag = grpcclient.InferInput("TAG", [1, 1], "INT64")
        tag.set_data_from_numpy(np.full([1, 1], request.tag, np.int64))
        try:
            result = self.client.infer(
                "chaos_seq",
                [tag],
                sequence_id=corrid,
                sequence_end=True,
                client_timeout=UNARY_DEADLINE_S,
            )
        except InferenceServerException as exc:
            self.ledger.final(request, _grpc_error(exc))
            return
        self.ledger.final(request, Outcome("ok"), _tag_of(result))

    def burst(self, model: str, count: int, delay_ms: int) -> None:
        """``count`` requests at once: past the model's queue limit, some are refused."""
        done = threading.Semaphore(0)
        for _ in range(count):
            request = self.ledger.open("grpc/burst", model, UNARY_DEADLINE_S)

            def callback(result: object, error: object, request: Request = request) -> None:
                if error is not None:
                    self.ledger.final(request, _grpc_error(error))  # type: ignore[arg-type]
                else:
                    self.ledger.final(request, Outcome("ok"), _tag_of(result))
                done.release()

            self.client.async_infer(
                model,
                _tensors(request.tag, delay_ms),
                callback,
                request_id=str(request.id),
                client_timeout=UNARY_DEADLINE_S,
            )
        for _ in range(count):
            done.acquire(timeout=UNARY_DEADLINE_S + 5)

    def close(self) -> None:
        self.client.close()


class GrpcStreams:
    """Requests on one ``ModelStreamInfer`` stream to the decoupled chaos_stream model,
    ``depth`` in flight at a time; each ends with the empty final response or an error."""

    def __init__(self, url: str, ledger: Ledger, depth: int = 1) -> None:
        self.url, self.ledger, self.depth = url, ledger, depth
        self._lock = threading.Lock()
        self._flight: dict[str, Request] = {}
        self._ended = threading.Condition(self._lock)
        self._client: grpcclient.InferenceServerClient | None = None
        self._last_final = ""
        self._closing = False

    def _start(self) -> grpcclient.InferenceServerClient:
        client = grpcclient.InferenceServerClient(self.url)
        client.start_stream(self._callback)
        return client

    def _callback(self, result: object, error: object) -> None:
        if error is not None and self._closing:
            return  # our own stop_stream(cancel_requests=True): "Locally cancelled"
        if error is not None:
            # tritonclient hands an in-stream error over without its request id (as for
            # Triton): it ends the oldest request in flight, which with ``depth`` 1 is
            # exactly the one it belongs to.
            with self._lock:
                oldest = next(iter(self._flight), None)
                request = self._flight.pop(oldest) if oldest is not None else None
                self._ended.notify_all()
            if request is None:
                last = self._last_final
                self.ledger.violation_text(
                    "grpc/stream error with no request in flight (a second final answer "
                    f"for request {last!r}?): {error}"
                )
            else:
                self.ledger.final(request, _grpc_error(error))  # type: ignore[arg-type]
            return
        response = result.get_response()  # type: ignore[attr-defined]
        final = response.parameters["triton_final_response"].bool_param
        with self._lock:
            request = self._flight.get(response.id)
            if final and request is not None:
                del self._flight[response.id]
                self._last_final = response.id
                self._ended.notify_all()
        if request is None:
            self.ledger.violation_text(
                f"grpc/stream answer (final={final}) for request {response.id!r}, "
                "which had already ended or was never sent on this stream"
            )
            return
        tag = _tag_of(result)
        if tag is not None:
            self.ledger.response(request, tag)
        if final:
            self.ledger.final(request, Outcome("ok"), request.tag)

    def send(self, count: int, delay_ms: int) -> None:
        """Send one request; wait while ``depth`` are in flight. A stream whose requests
        do not end within their deadline is closed and their loss recorded."""
        if self._client is None:
            self._client = self._start()
        request = self.ledger.open("grpc/stream", "chaos_stream", STREAM_DEADLINE_S)
        with self._lock:
            self._flight[str(request.id)] = request
        try:
            self._client.async_stream_infer(
                "chaos_stream",
                _tensors(request.tag, delay_ms, count),
                request_id=str(request.id),
                enable_empty_final_response=True,
            )
        except InferenceServerException as exc:
            with self._lock:
                self._flight.pop(str(request.id), None)
            self.ledger.final(request, _grpc_error(exc))
            self._restart()
            return
        with self._lock:
            self._ended.wait_for(lambda: len(self._flight) < self.depth, STREAM_DEADLINE_S)
            stuck = [r for r in self._flight.values() if time.monotonic() - r.sent > r.deadline_s]
        if stuck:
            self._restart()

    def _restart(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            self._closing = True
            client.stop_stream(cancel_requests=True)
            client.close()
            self._closing = False
        with self._lock:
            left, self._flight = list(self._flight.values()), {}
        for request in left:
            self.ledger.final(request, Outcome("deadline", detail="stream closed by the tool"))

    def drain(self, timeout: float) -> None:
        with self._lock:
            self._ended.wait_for(lambda: not self._flight, timeout)
        self._restart()


def stream_cancel(url: str, ledger: Ledger, after: int = 3) -> None:
    """Open a stream, read ``after`` responses of a long answer, then close it."""
    client = grpcclient.InferenceServerClient(url)
    request = ledger.open("grpc/stream-cancel", "chaos_stream", STREAM_DEADLINE_S, ABANDON)
    seen = threading.Semaphore(0)

    def callback(result: object, error: object) -> None:
        seen.release()

    client.start_stream(callback)
    client.async_stream_infer(
        "chaos_stream",
        _tensors(request.tag, 20, 200),
        request_id=str(request.id),
        enable_empty_final_response=True,
    )
    for _ in range(after):
        if not seen.acquire(timeout=5):
            break
    client.stop_stream(cancel_requests=True)
    client.close()
    ledger.final(request, Outcome("abandoned"))


def deadline_call(unary: GrpcUnary, model: str) -> None:
    """A deadline shorter than the work: the answer is either in time or DEADLINE_EXCEEDED."""
    unary.call(model, 300, deadline_s=0.1, kind="grpc/deadline", expect=DEADLINE)
