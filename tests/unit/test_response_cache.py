"""The response cache's parts: the key, the LRU store and its byte accounting, the
``--cache-config`` values, and one version's lookups (hits, misses, identical requests
in flight, errors, requested outputs)."""

from __future__ import annotations

import numpy as np
import pytest

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.errors import Unavailable
from tritium.core.packed_bytes import PackedBytes, serialize_bytes
from tritium.core.statistics import ModelStatistics
from tritium.core.types import InputTensor, OutputTensor, RequestedOutput
from tritium.service.cache import ResponseStore, VersionCache, cache_for, parse_cache_config
from tritium.service.cache.key import DIGEST_SIZE, request_key, version_prefix
from tritium.service.cache.store import keep_outputs


def _input(name: str, data: np.ndarray, datatype: str = "FP32") -> InputTensor:
    return InputTensor(name, datatype, tuple(data.shape), data)


def _out(name: str, data: np.ndarray) -> OutputTensor:
    return OutputTensor(name, "FP32", tuple(data.shape), data)


# --- key ---------------------------------------------------------------------------------


def test_key_is_model_version_names_and_bytes_only() -> None:
    prefix = version_prefix("m", "1", 7)
    a = np.arange(4, dtype=np.float32)
    base = request_key(prefix, [_input("X", a)])
    assert len(base) == DIGEST_SIZE
    # Shape and datatype are not part of it: the same bytes seen as [2, 2] or INT32.
    assert request_key(prefix, [InputTensor("X", "FP32", (2, 2), a.reshape(2, 2))]) == base
    assert request_key(prefix, [InputTensor("X", "INT32", (4,), a.view(np.int32))]) == base
    # A non-contiguous view hashes its values.
    wide = np.zeros(8, np.float32)
    wide[::2] = a
    assert request_key(prefix, [_input("X", wide[::2])]) == base
    assert request_key(prefix, [_input("Y", a)]) != base
    assert request_key(prefix, [_input("X", a + 1)]) != base
    assert request_key(version_prefix("m", "2", 7), [_input("X", a)]) != base
    assert request_key(version_prefix("n", "1", 7), [_input("X", a)]) != base
    # Another load of the same version number does not share entries.
    assert request_key(version_prefix("m", "1", 8), [_input("X", a)]) != base


def test_key_input_order_and_boundaries() -> None:
    prefix = version_prefix("m", "1", 1)
    a, b = np.array([1], np.int8), np.array([2], np.int8)
    assert request_key(prefix, [_input("A", a), _input("B", b)]) == request_key(
        prefix, [_input("B", b), _input("A", a)]
    )
    # "AB" + b"" is not "A" + b"B"-like: names and bytes are length-prefixed.
    assert request_key(prefix, [_input("AB", np.array([], np.int8))]) != request_key(
        prefix, [_input("A", np.frombuffer(b"B", np.int8))]
    )


def test_key_bytes_tensors_packed_or_objects_agree() -> None:
    prefix = version_prefix("m", "1", 1)
    objects = np.array([b"ab", b"c"], dtype=np.object_)
    packed = PackedBytes(serialize_bytes(objects), (2,))
    assert request_key(prefix, [_input("S", objects, "BYTES")]) == request_key(
        prefix,
        [_input("S", packed, "BYTES")],  # type: ignore[arg-type]
    )


# --- config ------------------------------------------------------------------------------


def test_cache_config_spellings() -> None:
    assert parse_cache_config([]) is None
    assert parse_cache_config(["local,size=1048576"]).size == 1048576  # type: ignore[union-attr]
    assert parse_cache_config([], byte_size=4096).size == 4096  # type: ignore[union-attr]
    # --cache-config wins over the deprecated flag.
    assert parse_cache_config(["local,size=10"], byte_size=4096).size == 10  # type: ignore[union-attr]
    for bad in ("redis,host=x", "local", "local,size=x", "local,size=-1", "local,bytes=3"):
        with pytest.raises(ValueError):
            parse_cache_config([bad])


# --- store -------------------------------------------------------------------------------


def test_entry_bytes_are_exact_and_owned() -> None:
    data = np.arange(4, dtype=np.float32)
    kept, nbytes = keep_outputs([_out("OUT", data)], b"k" * 16)
    # payload + name + datatype + one dimension + key
    assert nbytes == 16 + 3 + 4 + 8 + 16
    data[0] = 99  # the kept copy does not see later writes to the worker's array
    assert kept[0].data[0] == 0
    assert not kept[0].data.flags.writeable


def test_lru_eviction_is_deterministic_and_bounded() -> None:
    one = keep_outputs([_out("O", np.zeros(4, np.float32))], b"x" * 16)[1]
    store = ResponseStore(3 * one)
    for key in (b"a" * 16, b"b" * 16, b"c" * 16):
        store.insert(key, [_out("O", np.zeros(4, np.float32))], "v")
    assert len(store) == 3 and store.used == 3 * one
    assert store.lookup(b"a" * 16) is not None  # a is now the most recent
    store.insert(b"d" * 16, [_out("O", np.zeros(4, np.float32))], "v")
    assert store.evictions == 1
    assert store.peek(b"b" * 16) is None  # b was the least recently used
    assert all(store.peek(k * 16) is not None for k in (b"a", b"c", b"d"))
    assert store.used == 3 * one <= store.size
    assert store.utilization == 1.0
    assert (store.hits, store.misses) == (1, 0)


def test_response_larger_than_the_store_is_not_kept() -> None:
    store = ResponseStore(64)
    store.insert(b"s" * 16, [_out("O", np.zeros(4, np.float32))], "v")
    assert len(store) == 1
    store.insert(b"b" * 16, [_out("O", np.zeros(100, np.float32))], "v")
    assert store.peek(b"b" * 16) is None
    assert len(store) == 1 and store.evictions == 0  # nothing was evicted for it


def test_drop_owner() -> None:
    store = ResponseStore(10_000)
    store.insert(b"a" * 16, [_out("O", np.zeros(4, np.float32))], "old")
    store.insert(b"b" * 16, [_out("O", np.zeros(4, np.float32))], "new")
    assert store.drop_owner("old") == 1
    assert store.peek(b"a" * 16) is None and store.peek(b"b" * 16) is not None
    assert store.used == keep_outputs([_out("O", np.zeros(4, np.float32))], b"b" * 16)[1]
    assert store.drop_owner("old") == 0


def test_reinserting_a_key_replaces_it() -> None:
    store = ResponseStore(10_000)
    store.insert(b"a" * 16, [_out("O", np.zeros(4, np.float32))], "v")
    used = store.used
    store.insert(b"a" * 16, [_out("O", np.zeros(4, np.float32))], "v")
    assert len(store) == 1 and store.used == used


# --- one version's cache ---------------------------------------------------------------


class _Model:
    """A fake scheduler: answers OUT = X and P = X * 2 when told."""

    def __init__(self) -> None:
        self.pending: list[tuple[InferRequest, Completion[InferResponse]]] = []
        self.runs = 0

    def submit(self, request: InferRequest) -> Completion[InferResponse]:
        self.runs += 1
        done: Completion[InferResponse] = Completion()
        self.pending.append((request, done))
        return done

    def answer(self, error: bool = False) -> None:
        request, done = self.pending.pop(0)
        x = request.inputs[0].data
        response = InferResponse("m", "1", request.id, [_out("OUT", x), _out("P", x * 2)])
        if error:
            response = InferResponse("m", "1", request.id, error=Unavailable("failed"))
        done.set_result(response)


def _cache(size: int = 1 << 20) -> tuple[VersionCache, ModelStatistics, ResponseStore]:
    store = ResponseStore(size)
    stats = ModelStatistics()
    return VersionCache(store, stats, "m", "1", frozenset({"OUT", "P"})), stats, store


def _request(value: float, rid: str = "", outputs: list[str] | None = None) -> InferRequest:
    return InferRequest(
        "m",
        id=rid,
        inputs=[_input("X", np.full(4, value, np.float32))],
        outputs=None if outputs is None else [RequestedOutput(n) for n in outputs],
    )


def test_miss_then_hit_without_the_model() -> None:
    cache, stats, store = _cache()
    model = _Model()
    first = cache.submit(_request(1.0, "a"), model.submit)
    model.answer()
    assert first.result().outputs[0].data.tolist() == [1.0] * 4
    hit = cache.submit(_request(1.0, "b"), model.submit)
    assert hit.done() and model.runs == 1
    response = hit.result()
    assert response.id == "b"
    assert [o.name for o in response.outputs] == ["OUT", "P"]
    assert (stats.cache_hit.count, stats.cache_miss.count) == (1, 1)
    assert stats.cache_miss.ns > 0 and stats.cache_hit.ns > 0
    assert (store.hits, store.misses, store.lookups) == (1, 1, 2)
    assert len(store) == 1


def test_hit_answers_the_outputs_asked_for() -> None:
    cache, _, _ = _cache()
    model = _Model()
    cache.submit(_request(1.0), model.submit)
    model.answer()
    only_p = cache.submit(_request(1.0, outputs=["P"]), model.submit).result()
    assert [o.name for o in only_p.outputs] == ["P"]
    assert model.runs == 1


def test_entry_missing_an_output_asked_for_is_a_miss() -> None:
    cache, stats, store = _cache()
    model = _Model()
    narrow = cache.submit(_request(1.0, outputs=["OUT"]), model.submit)
    request, done = model.pending.pop(0)
    done.set_result(InferResponse("m", "1", "", [_out("OUT", request.inputs[0].data)]))
    assert narrow.result().outputs[0].name == "OUT"
    # All outputs (none named) are not all in the entry: the model runs again.
    cache.submit(_request(1.0), model.submit)
    assert model.runs == 2
    assert (store.hits, store.misses) == (0, 2)
    model.answer()
    assert stats.cache_miss.count == 2
    assert cache.submit(_request(1.0), model.submit).done()
    assert model.runs == 2


def test_error_responses_are_not_cached() -> None:
    cache, stats, store = _cache()
    model = _Model()
    cache.submit(_request(1.0), model.submit)
    model.answer(error=True)
    assert len(store) == 0
    cache.submit(_request(1.0), model.submit)
    assert model.runs == 2
    assert stats.cache_hit.count == 0


def test_identical_requests_in_flight_run_once() -> None:
    cache, stats, store = _cache()
    model = _Model()
    calls = [cache.submit(_request(3.0, f"r{i}"), model.submit) for i in range(5)]
    assert model.runs == 1 and not any(c.done() for c in calls)
    model.answer()
    assert all(c.done() for c in calls)
    assert [c.result().id for c in calls] == [f"r{i}" for i in range(5)]
    assert (stats.cache_hit.count, stats.cache_miss.count) == (4, 1)
    assert (store.hits, store.misses) == (4, 1)


def test_waiters_run_on_their_own_when_the_first_fails() -> None:
    cache, stats, _ = _cache()
    model = _Model()
    first = cache.submit(_request(3.0, "a"), model.submit)
    second = cache.submit(_request(3.0, "b"), model.submit)
    model.answer(error=True)
    assert first.result().error is not None
    assert model.runs == 2 and not second.done()
    model.answer()
    assert second.result().id == "b" and second.result().error is None
    assert stats.cache_miss.count == 2


def test_drop_on_unload_and_cache_for() -> None:
    cache, _, store = _cache()
    model = _Model()
    cache.submit(_request(1.0), model.submit)
    model.answer()
    assert len(store) == 1
    cache.drop()
    assert len(store) == 0 and store.used == 0
    stats = ModelStatistics()
    on = {"response_cache": {"enable": True}}
    assert cache_for(None, on, stats, "m", "1", frozenset()) is None
    assert cache_for(store, {}, stats, "m", "1", frozenset()) is None
    assert cache_for(store, on, stats, "m", "1", frozenset()) is not None


def test_statistics_report_cache_counters() -> None:
    stats = ModelStatistics()
    assert stats.as_json("m", "1")["inference_stats"]["cache_hit"] == {"count": 0, "ns": 0}
    stats.cache_hit.add(5)
    stats.cache_miss.add(7)
    inference = stats.as_json("m", "1")["inference_stats"]
    assert inference["cache_hit"] == {"count": 1, "ns": 5}
    assert inference["cache_miss"] == {"count": 1, "ns": 7}


# --- replays: a frontend's key for a whole request, filed with an entry ------------------


def _hit_with_form(cache: VersionCache, model: _Model, value: float) -> object:
    """A miss then a hit for ``value``; the hit's entry keeps a form "F" of 10 bytes."""
    cache.submit(_request(value), model.submit)
    model.answer()
    hit = cache.submit(_request(value), model.submit).result()
    forms = hit.encoded_forms
    assert forms is not None and forms.keep_encoded("F", b"0123456789", 10)
    return forms


def test_a_replay_answers_with_its_form_and_counts_as_a_hit() -> None:
    cache, stats, store = _cache()
    model = _Model()
    forms = _hit_with_form(cache, model, 1.0)
    assert cache.replay(("req", 1)) is None  # nothing filed: nothing counted
    assert (store.hits, store.misses, stats.cache_hit.count) == (1, 1, 1)
    used = store.used
    assert forms.keep_replay(("req", 1), "F", 7)  # type: ignore[attr-defined]
    assert store.used == used + 7
    assert not forms.keep_replay(("req", 1), "F", 7)  # type: ignore[attr-defined]
    assert not forms.keep_replay(("req", 2), "G", 7)  # type: ignore[attr-defined]  # no such form
    success = stats.success.count
    assert cache.replay(("req", 1)) == b"0123456789"
    assert model.runs == 1
    assert (store.hits, store.misses, store.lookups) == (2, 1, 3)
    assert stats.cache_hit.count == 2 and stats.success.count == success + 1
    assert stats.queue.count == success + 1
    # Another version's cache does not answer this version's replays.
    other = VersionCache(store, ModelStatistics(), "m", "2", frozenset({"OUT", "P"}))
    assert other.replay(("req", 1)) is None


def test_replays_go_with_their_entry() -> None:
    cache, _stats, store = _cache()
    model = _Model()
    forms = _hit_with_form(cache, model, 1.0)
    assert forms.keep_replay(("req", 1), "F", 7)  # type: ignore[attr-defined]
    cache.drop()  # unloaded or reloaded
    assert cache.replay(("req", 1)) is None
    assert store.used == 0 and len(store) == 0
    assert not forms.keep_replay(("req", 9), "F", 7)  # type: ignore[attr-defined]


def test_an_evicted_entry_takes_its_replays_and_a_replay_makes_its_entry_recent() -> None:
    one = keep_outputs(
        [_out("OUT", np.zeros(4, np.float32)), _out("P", np.zeros(4, np.float32))],
        bytes(DIGEST_SIZE + 16),
    )[1]
    # Room for two entries with their forms and replays, not three.
    cache, _stats, store = _cache(size=2 * (one + 10 + 7) + 5)
    model = _Model()
    first = _hit_with_form(cache, model, 1.0)
    assert first.keep_replay(("req", 1), "F", 7)  # type: ignore[attr-defined]
    second = _hit_with_form(cache, model, 2.0)
    assert second.keep_replay(("req", 2), "F", 7)  # type: ignore[attr-defined]
    assert cache.replay(("req", 1)) is not None  # entry 1 is now the most recent
    cache.submit(_request(3.0), model.submit)
    model.answer()  # a third entry evicts the least recent: entry 2, with its replay
    assert cache.replay(("req", 2)) is None
    assert cache.replay(("req", 1)) == b"0123456789"
    assert store.used <= store.size and store.evictions == 1
