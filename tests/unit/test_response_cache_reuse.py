"""Response-cache hits answered with the encoded bytes of an earlier hit.

A hit must answer byte for byte what a miss answers for the same request, apart from
the id: HTTP JSON and binary outputs, gRPC for both transports, every requested-output
selection and binary flag, with and without ids. The kept bytes count against the
cache's size, which is never exceeded, and go with their entry (eviction, reload).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest
from tritonclient.grpc import service_pb2

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.statistics import ModelStatistics
from tritium.core.types import OutputTensor
from tritium.frontends.grpc.infer_calls import _finish_infer, finish_infer_bytes
from tritium.frontends.grpc.infer_response_bytes import SPLIT_BYTES, SplitMessage
from tritium.frontends.grpc.servicer import _serialize
from tritium.frontends.http.handlers import KServeRoutes
from tritium.frontends.http.infer_decode import decode_infer_request
from tritium.frontends.http.messages import HttpRequest, HttpResponse
from tritium.frontends.http.output_prefs import OutputPrefs
from tritium.service.cache import ResponseStore, VersionCache

MODEL = "m"
VALUES = np.arange(6, dtype=np.float32)
RUNS = np.array([1], np.int64)


def _executed(request: InferRequest, outputs: list[OutputTensor] | None = None) -> Completion:
    """What a worker answers: OUT (the input) and RUN, those asked for."""
    done: Completion[InferResponse] = Completion()
    data = request.inputs[0].data
    if outputs is None:
        outputs = [
            OutputTensor("OUT", "FP32", tuple(data.shape), np.array(data)),
            OutputTensor("RUN", "INT64", (1,), RUNS.copy()),
        ]
    if request.outputs is not None:  # as a worker answers: the outputs asked for only
        asked = {o.name for o in request.outputs}
        outputs = [o for o in outputs if o.name in asked]
    done.set_result(InferResponse(MODEL, "1", outputs=outputs))
    return done


def _cache(size: int = 1 << 20) -> VersionCache:
    return VersionCache(ResponseStore(size), ModelStatistics(), MODEL, "1", frozenset({"OUT", "RUN"}))


def _settled(request: InferRequest, done: Completion) -> InferResponse:
    """The response as the service's settle step leaves it for the frontend."""
    response = done.result()
    response.model_name, response.model_version, response.id = MODEL, "1", request.id
    return response


def _http_body(
    request_id: str | None, outputs: list[dict] | None, binary_default: bool, binary_input: bool
) -> tuple[bytes, int]:
    doc: dict[str, Any] = {}
    if request_id is not None:
        doc["id"] = request_id
    entry: dict[str, Any] = {"name": "IN", "datatype": "FP32", "shape": [6]}
    if binary_input:
        entry["parameters"] = {"binary_data_size": VALUES.nbytes}
    else:
        entry["data"] = VALUES.tolist()
    doc["inputs"] = [entry]
    if binary_default:
        doc["parameters"] = {"binary_data_output": True}
    if outputs is not None:
        doc["outputs"] = outputs
    header = json.dumps(doc, separators=(",", ":")).encode()
    return header + (VALUES.tobytes() if binary_input else b""), len(header)


def _http_answer(
    cache: VersionCache, request_id: str | None, outputs: list[dict] | None, binary: bool,
    binary_input: bool = True,
) -> tuple[HttpResponse, bool]:
    """(the HTTP answer, whether it was a hit) for one request through the cache."""
    body, length = _http_body(request_id, outputs, binary, binary_input)
    request, prefs = decode_infer_request(MODEL, "", body, length)
    done = cache.submit(request, _executed)
    hit = done.result().encoded_forms is not None
    _settled(request, done)
    routes = KServeRoutes(None, 1 << 30)  # type: ignore[arg-type]  # _encode needs no service
    answer = routes._encode(request.id, prefs, None, done)
    assert isinstance(answer, HttpResponse)
    return answer, hit


def _joined(answer: HttpResponse) -> tuple[bytes, list]:
    body = answer.body if type(answer.body) is bytes else b"".join(answer.body)  # type: ignore[arg-type]
    return body, sorted(answer.headers or [])


SELECTIONS: list[list[dict] | None] = [
    None,
    [{"name": "OUT"}],
    [{"name": "RUN"}, {"name": "OUT"}],
    [{"name": "OUT", "parameters": {"binary_data": True}}],
    [{"name": "OUT", "parameters": {"binary_data": True}}, {"name": "RUN"}],
    [{"name": "RUN", "parameters": {"binary_data": False}}],
]


@pytest.mark.parametrize("outputs", SELECTIONS)
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("request_id", [None, "7", "a-much-longer-id \u00e9"])
def test_http_hits_answer_the_bytes_of_a_miss(
    outputs: list[dict] | None, binary: bool, request_id: str | None
) -> None:
    cache = _cache()
    miss, hit = _http_answer(cache, request_id, outputs, binary)
    assert not hit
    first, hit = _http_answer(cache, request_id, outputs, binary)  # encodes and keeps
    assert hit
    kept = cache.store.used
    again, hit = _http_answer(cache, request_id, outputs, binary)  # reuses
    assert hit and cache.store.used == kept
    assert _joined(first) == _joined(miss) == _joined(again)
    assert first.content_type == miss.content_type == again.content_type
    # Another id: the same answer with that id (and its header length, when binary).
    other, _ = _http_answer(cache, "other-id", outputs, binary)
    body, headers = _joined(other)
    expected, _ = _joined(miss)
    want = b'{"id":"other-id",' + (expected[1:] if request_id is None else expected.split(b",", 1)[1])
    assert body == want
    if dict(headers).get(b"Inference-Header-Content-Length") is not None:
        header_length = int(dict(headers)[b"Inference-Header-Content-Length"])
        assert orjson.loads(body[:header_length])["id"] == "other-id"


def test_http_forms_are_kept_per_selection_and_binary_flag() -> None:
    cache = _cache()
    _http_answer(cache, "1", None, False)  # the miss
    entry = cache.store.peek(next(iter(cache.store._entries)))
    assert entry is not None and entry.forms is None
    answers = set()
    for outputs in SELECTIONS:
        for binary in (False, True):
            answer, hit = _http_answer(cache, "1", outputs, binary)
            assert hit
            answers.add(_joined(answer)[0])
    # One form per distinct answer: requests that differ only in how they say it share.
    assert entry.forms is not None and len(entry.forms) == len(answers)
    assert cache.store.used == entry.nbytes <= cache.store.size


def test_http_json_inputs_hit_the_same_entry_and_bytes() -> None:
    cache = _cache()
    miss, _ = _http_answer(cache, "q", None, False, binary_input=True)
    hit, was_hit = _http_answer(cache, "q", None, False, binary_input=False)
    again, _ = _http_answer(cache, "q", None, False, binary_input=False)
    assert was_hit and _joined(hit) == _joined(miss) == _joined(again)


# --- gRPC --------------------------------------------------------------------------------


def _grpc_request(request_id: str, outputs: list[str] | None) -> InferRequest:
    from tritium.core.types import InputTensor, RequestedOutput

    request = InferRequest(MODEL, "", request_id, [InputTensor("IN", "FP32", (6,), VALUES)])
    if outputs is not None:
        request.outputs = [RequestedOutput(name) for name in outputs]
    return request


def _grpc_answers(cache: VersionCache, request_id: str, outputs: list[str] | None) -> tuple:
    """(native bytes, grpcio bytes, hit) for one request."""
    request = _grpc_request(request_id, outputs)
    done = cache.submit(request, _executed)
    response = _settled(request, done)
    hit = response.encoded_forms is not None
    native = finish_infer_bytes(request.id, response)
    native = native.joined() if type(native) is SplitMessage else native
    grpcio = _serialize(_finish_infer(request.id, response))
    return native, grpcio, hit


@pytest.mark.parametrize("outputs", [None, ["OUT"], ["RUN"], ["RUN", "OUT"]])
@pytest.mark.parametrize("request_id", ["", "42", "x" * 300])
def test_grpc_hits_answer_the_bytes_of_a_miss(outputs: list[str] | None, request_id: str) -> None:
    cache = _cache()
    miss_native, miss_grpcio, hit = _grpc_answers(cache, request_id, outputs)
    assert not hit and miss_native == miss_grpcio
    for _ in range(2):  # the first hit encodes and keeps, the second reuses
        native, grpcio, hit = _grpc_answers(cache, request_id, outputs)
        assert hit and native == grpcio == miss_native
    other, other_grpcio, _ = _grpc_answers(cache, "another", outputs)
    message = service_pb2.ModelInferResponse.FromString(other)
    expected = service_pb2.ModelInferResponse.FromString(miss_native)
    expected.id = "another"
    assert message == expected and other == other_grpcio == expected.SerializeToString()


def test_grpc_big_hits_stay_in_parts() -> None:
    cache = _cache(8 << 20)
    big = np.arange(SPLIT_BYTES // 4 + 16, dtype=np.float32)

    def execute(request: InferRequest) -> Completion:
        return _executed(request, [OutputTensor("OUT", "FP32", tuple(big.shape), big.copy())])

    answers = []
    for _ in range(3):
        request = _grpc_request("big", ["OUT"])
        done = cache.submit(request, execute)
        answers.append(finish_infer_bytes("big", _settled(request, done)))
    assert all(type(a) is SplitMessage for a in answers)
    assert answers[0].joined() == answers[1].joined() == answers[2].joined()  # type: ignore[union-attr]


# --- memory ------------------------------------------------------------------------------


def test_kept_bytes_count_against_the_size_and_evict_older_entries() -> None:
    cache = _cache(size=2000)
    store = cache.store
    for i in range(4):  # misses: four entries of different inputs
        request = _grpc_request(f"r{i}", None)
        request.inputs[0].data = VALUES + i
        cache.submit(request, _executed)
    entries_before = len(store)
    used_before = store.used
    # Hits on the last one keep its encoded forms until the older entries must go.
    for outputs in (None, ["OUT"], ["RUN"]):
        for binary in (False, True):
            request = _grpc_request("h", outputs)
            request.inputs[0].data = VALUES + 3
            response = _settled(request, cache.submit(request, _executed))
            assert response.encoded_forms is not None
            finish_infer_bytes("h", response)
            prefs = OutputPrefs(default_binary=binary)
            KServeRoutes(None, 1 << 30)._encode("h", prefs, None, _completed(response))  # type: ignore[arg-type]
            assert store.used <= store.size
    assert store.used > used_before
    total = sum(e.nbytes for e in store._entries.values())
    assert store.used == total <= store.size
    assert len(store) <= entries_before


def _completed(response: InferResponse) -> Completion:
    done: Completion[InferResponse] = Completion()
    done.set_result(response)
    return done


def test_forms_are_not_kept_when_they_do_not_fit_or_the_entry_is_gone() -> None:
    store = ResponseStore(200)
    outputs = [OutputTensor("OUT", "FP32", (4,), np.zeros(4, np.float32))]
    store.insert(b"k" * 16, outputs, owner="v")
    entry = store.peek(b"k" * 16)
    assert entry is not None
    assert not entry.keep_encoded("big", b"x" * 200, 200)  # entry + form > size
    assert entry.keep_encoded("small", b"x" * 10, 10)
    assert not entry.keep_encoded("small", b"y" * 10, 10)  # one value per form
    assert entry.encoded("small") == b"x" * 10 and store.used == entry.nbytes
    store.drop_owner("v")  # a reload or unload
    assert store.used == 0 and len(store) == 0
    assert not entry.keep_encoded("later", b"z", 1)  # a hit answered before the drop
    assert store.used == 0


def test_reload_drops_the_kept_bytes_with_the_entries() -> None:
    cache = _cache()
    for _ in range(3):
        _http_answer(cache, "1", None, True)
        _grpc_answers(cache, "1", None)
    assert cache.store.used > 0
    cache.drop()
    assert cache.store.used == 0 and len(cache.store) == 0
    # The next request is a miss again, its hits encode anew.
    _, hit = _http_answer(cache, "1", None, True)
    assert not hit


def test_shared_memory_and_classification_hits_reuse_nothing() -> None:
    cache = _cache()
    cache.submit(_grpc_request("1", None), _executed)
    request = _grpc_request("1", None)
    request.classification = {"OUT": 2}
    assert cache.submit(request, _executed).result().encoded_forms is None
    request = _grpc_request("1", None)
    request.shared_memory = True
    assert cache.submit(request, _executed).result().encoded_forms is None


def test_grpc_hit_with_parameters_is_serialised_by_protobuf() -> None:
    cache = _cache()
    cache.submit(_grpc_request("p", None), _executed)
    request = _grpc_request("p", None)
    response = _settled(request, cache.submit(request, _executed))
    response.parameters = {"note": "x"}  # not what a kept response carries: no reuse
    native = finish_infer_bytes("p", response)
    message = service_pb2.ModelInferResponse.FromString(native)  # type: ignore[arg-type]
    assert message.id == "p" and message.parameters["note"].string_param == "x"
    assert response.encoded_forms is not None and response.encoded_forms.encoded(("grpc", "OUT", "RUN")) is None


class _Service:
    """What ``KServeRoutes.infer`` uses of the service, over one version's cache."""

    def __init__(self, cache: VersionCache, version: str = "") -> None:
        self.cache = cache
        self.version = version
        self.submitted = 0

    def submit(self, request: InferRequest) -> Completion:
        self.submitted += 1
        request.arrival_ns = 1
        done = self.cache.submit(request, _executed)
        _settled(request, done)
        return done

    def replay(self, name: str, version: str, replay: object) -> Any:
        assert (name, version) == (MODEL, self.version)
        return self.cache.replay(replay)


@pytest.mark.parametrize("binary_input", [False, True])
@pytest.mark.parametrize("outputs", [None, [{"name": "OUT", "parameters": {"binary_data": True}}]])
def test_http_requests_like_an_earlier_hit_are_replayed_without_decoding(
    binary_input: bool, outputs: list[dict] | None
) -> None:
    cache = _cache()
    service = _Service(cache)
    routes = KServeRoutes(service, 1 << 30)  # type: ignore[arg-type]

    def answer(request_id: str | None, headers: dict[str, str] | None = None) -> tuple:
        body, length = _http_body(request_id, outputs, False, binary_input)
        head = {"inference-header-content-length": str(length)} if binary_input else {}
        request = HttpRequest(
            "POST", f"/v2/models/{MODEL}/infer", "", {**head, **(headers or {})}, body
        )
        reply = routes.infer(request, {"model": MODEL})
        assert isinstance(reply, HttpResponse)
        return _joined(reply)

    miss = answer("1")
    assert answer("2") != miss and service.submitted == 2  # a hit, filed as a replay
    hits = cache.stats.cache_hit.count
    for request_id in ("3", None, "a-much-longer-id"):
        body, headers = answer(request_id)
        assert service.submitted == 2  # answered by the replay: never decoded or submitted
        _, expected_headers = miss
        if request_id is None:
            assert body == b"{" + miss[0].split(b",", 1)[1]
        else:
            assert body == b'{"id":"%s",' % request_id.encode() + miss[0].split(b",", 1)[1]
        if binary_input or outputs:
            lengths = dict(headers), dict(expected_headers)
            key = b"Inference-Header-Content-Length"
            if key in lengths[1]:
                assert int(lengths[0][key]) - int(lengths[1][key]) == len(body) - len(miss[0])
    assert cache.stats.cache_hit.count == hits + 3
    # Another input value, or a request asking for compression, takes the full path.
    answer("4", {"accept-encoding": "gzip"})
    assert service.submitted == 3
    cache.drop()  # the version was unloaded: its replays are gone with its entries
    answer("5")
    assert service.submitted == 4


@pytest.mark.parametrize("version", ["", "1"])
@pytest.mark.parametrize("outputs", [None, ["OUT"]])
def test_grpc_requests_like_an_earlier_hit_are_replayed_without_decoding(
    version: str, outputs: list[str] | None
) -> None:
    from tritium.frontends.grpc.infer_bytes import begin_infer_bytes
    from tritium.frontends.grpc.infer_plans import RequestPlans

    cache = _cache()
    service = _Service(cache, version)
    plans = RequestPlans()

    def answer(request_id: str) -> bytes:
        message = service_pb2.ModelInferRequest(model_name=MODEL, model_version=version, id=request_id)
        message.inputs.add(name="IN", datatype="FP32", shape=[6])
        message.raw_input_contents.append(VALUES.tobytes())
        for name in outputs or ():
            message.outputs.add(name=name)
        done, finish = begin_infer_bytes(service, plans, message.SerializeToString())  # type: ignore[arg-type]
        reply = finish(done.result())
        return reply.joined() if type(reply) is SplitMessage else reply

    miss = service_pb2.ModelInferResponse.FromString(answer("m"))
    answer("h")  # a hit: filed as a replay
    assert service.submitted == 2
    hits = cache.stats.cache_hit.count
    for request_id in ("r1", "", "a-longer-id"):
        reply = service_pb2.ModelInferResponse.FromString(answer(request_id))
        assert service.submitted == 2  # replayed: never decoded or submitted
        expected = service_pb2.ModelInferResponse()
        expected.CopyFrom(miss)
        expected.id = request_id
        assert reply == expected
    assert cache.stats.cache_hit.count == hits + 3
    cache.drop()
    answer("after")
    assert service.submitted == 3
