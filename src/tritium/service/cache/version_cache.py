"""One served version's use of the response store: look up, answer, execute, insert.

A hit is answered at once from the main process (a new response over the kept arrays:
it never reaches the scheduler or a worker); it carries the entry as its
``encoded_forms``, where frontends keep the bytes they encode it into and reuse them. A miss goes to the scheduler; its successful
response is kept before anything else sees it (so later steps that rewrite a response,
reshape or classification, work on their own copy of the list). Identical requests that
arrive while the first is executing wait for it and are answered from its response (one
execution; Triton 2.51 executes each of them). A response with an error is not kept; the
requests that waited for it then execute on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from tritium.core import Completion, InferRequest, InferResponse
from tritium.core.clock import now_ns
from tritium.core.statistics import ModelStatistics
from tritium.core.types import OutputTensor
from tritium.service.cache.key import request_key, version_prefix
from tritium.service.cache.store import CachedResponse, ResponseStore

_Waiter = tuple[InferRequest, Completion[InferResponse], int]


class VersionCache:
    """The response cache in front of one loaded version's ``submit`` (its scheduler's)."""

    __slots__ = ("store", "stats", "name", "version", "outputs", "_prefix", "_pending")

    _generations = 0

    def __init__(
        self,
        store: ResponseStore,
        stats: ModelStatistics,
        name: str,
        version: str,
        outputs: frozenset[str],
    ) -> None:
        VersionCache._generations += 1
        self.store = store
        self.stats = stats
        self.name = name
        self.version = version
        #: The model's outputs: an entry answers a request for all of them only if it
        #: holds each (the first request may have asked for fewer).
        self.outputs = outputs
        self._prefix = version_prefix(name, version, VersionCache._generations)
        # key -> the requests waiting for the execution of an identical one.
        self._pending: dict[bytes, list[_Waiter]] = {}

    def submit(
        self,
        request: InferRequest,
        execute: Callable[[InferRequest], Completion[InferResponse]],
    ) -> Completion[InferResponse]:
        """Answer ``request`` from the store, or from an identical request in flight, or
        run it with ``execute`` (the scheduler's submit) and keep its response. The lookup
        is timed from the request's arrival (stamped just before)."""
        start = request.arrival_ns or now_ns()
        store = self.store
        key = request_key(self._prefix, request.inputs)
        entry = store.lookup(key)
        if entry is not None and self._answers(entry, request):
            done: Completion[InferResponse] = Completion()
            request.dispatch_ns = end = now_ns()
            store.lookup_ns += end - start
            self.stats.cache_hit.add(end - start)
            done.set_result(self._response(entry, request))
            return done
        if entry is not None:
            # It lacks an output this request asks for: a miss, as the store counted a hit.
            store.hits -= 1
            store.misses += 1
        waiters = self._pending.get(key)
        if waiters is not None:
            done = Completion()
            lookup_ns = now_ns() - start
            store.lookup_ns += lookup_ns
            waiters.append((request, done, lookup_ns))
            return done
        lookup_ns = now_ns() - start
        store.lookup_ns += lookup_ns
        executed = execute(request)
        self._pending[key] = []
        executed.add_done_callback(
            lambda finished: self._finished(key, lookup_ns, execute, finished)
        )
        return executed

    def replay(self, replay: Hashable) -> Any:
        """The encoded form filed for ``replay`` (a frontend's key for a whole request) with
        one of this version's entries, counted as a cache hit exactly as :meth:`submit`
        and the request's settling count one; None when none is filed."""
        start = now_ns()
        store = self.store
        form = store.replay(replay, self)
        if form is None:
            return None
        spent = now_ns() - start
        store.lookup_ns += spent
        stats = self.stats
        stats.cache_hit.add(spent)
        stats.record_request(True, spent, spent)
        return form

    def drop(self) -> None:
        """Drop this version's entries (it is reloaded or unloaded)."""
        self.store.drop_owner(self)

    def _finished(
        self,
        key: bytes,
        lookup_ns: int,
        execute: Callable[[InferRequest], Completion[InferResponse]],
        finished: Completion[InferResponse],
    ) -> None:
        waiters = self._pending.pop(key, [])
        response = None
        if not finished.cancelled() and finished.exception() is None:
            response = finished.result()
            if response.error is not None:
                response = None
        insert_ns = 0
        entry = None
        if response is not None:
            insert_ns = self.store.insert(key, response.outputs, self)
            entry = self.store.peek(key)
        self.stats.cache_miss.add(lookup_ns + insert_ns)
        for request, done, waited_lookup_ns in waiters:
            if entry is not None and self._answers(entry, request):
                self.store.hits += 1
                self.store.misses -= 1
                request.dispatch_ns = now_ns()
                self.stats.cache_hit.add(waited_lookup_ns)
                done.set_result(self._response(entry, request))
            else:
                self._execute_waiter(request, done, waited_lookup_ns, execute)

    def _execute_waiter(
        self,
        request: InferRequest,
        done: Completion[InferResponse],
        lookup_ns: int,
        execute: Callable[[InferRequest], Completion[InferResponse]],
    ) -> None:
        """A waiter whose identical request failed (or was not kept) runs on its own."""
        self.stats.cache_miss.add(lookup_ns)
        try:
            executed = execute(request)
        except BaseException as exc:  # noqa: BLE001 - handed to the request's completion
            done.set_exception(exc)
            return
        executed.add_done_callback(lambda finished: _forward(finished, done))

    def _answers(self, entry: CachedResponse, request: InferRequest) -> bool:
        """The entry holds every output the request asks for."""
        asked = request.outputs
        names = entry.names
        if asked is None:
            return names >= self.outputs
        if len(asked) == 1:  # the usual explicit request: no generator
            return asked[0].name in names
        return all(o.name in names for o in asked)

    def _response(self, entry: CachedResponse, request: InferRequest) -> InferResponse:
        asked = request.outputs
        if asked is None:
            outputs = [_fresh(o) for o in entry.outputs]
        elif len(asked) == 1 and len(entry.outputs) == 1:
            outputs = [_fresh(entry.outputs[0])]  # _answers checked it is the one asked
        else:
            names = {o.name for o in asked}
            outputs = [_fresh(o) for o in entry.outputs if o.name in names]
        response = InferResponse(self.name, self.version, request.id, outputs)
        if not request.shared_memory and request.classification is None:
            # The outputs go out as kept: a frontend may reuse their encoded bytes.
            response.encoded_forms = entry
        return response


def _fresh(output: OutputTensor) -> OutputTensor:
    # A new tensor over the kept array: settling a response may rewrite its tensors.
    return OutputTensor(output.name, output.datatype, output.shape, output.data)


def _forward(finished: Completion[InferResponse], done: Completion[Any]) -> None:
    if finished.cancelled():
        done.cancel()
        return
    exc = finished.exception()
    if exc is not None:
        done.set_exception(exc)
    else:
        done.set_result(finished.result())


def cache_for(
    store: ResponseStore | None,
    config: dict[str, Any],
    stats: ModelStatistics,
    name: str,
    version: str,
    outputs: frozenset[str],
) -> VersionCache | None:
    """The version's cache when the server has a store and the model's config has
    ``response_cache { enable: true }``; else None (requests then pay one attribute check)."""
    if store is None or not config.get("response_cache", {}).get("enable"):
        return None
    return VersionCache(store, stats, name, version, outputs)
