"""ModelInfer over the native transport: serialised requests in, serialised responses out.

Requests are decoded by the transport's :class:`RequestPlans`; answers are serialised
without message objects (``infer_response_bytes``). A small request byte for byte like an
earlier response-cache hit (less its id) is answered from the cache's kept bytes without
being decoded (``replays``).
"""

from __future__ import annotations

from functools import partial

from tritium.core.completion import Completion
from tritium.frontends.grpc.infer_calls import Finish, finish_infer_bytes, submit_unary
from tritium.frontends.grpc.infer_plans import RequestPlans
from tritium.frontends.grpc.infer_response_bytes import SplitMessage, spliced
from tritium.frontends.grpc.replays import REPLAY_BYTES, model_name, replay_key
from tritium.service.api import ServiceApi


def begin_infer_bytes(
    service: ServiceApi,
    plans: RequestPlans,
    data: bytes | memoryview,
    trace: dict[str, str] | None = None,
) -> tuple[Completion, Finish]:
    """``infer_calls.begin_infer`` for a serialised request; ``finish`` returns the
    serialised response (a :class:`SplitMessage` when big). Malformed bytes raise
    protobuf's ``DecodeError``. A small request like an earlier response-cache hit is
    answered from the cache's kept bytes without being decoded (``replays``)."""
    replayable = trace is None and len(data) <= REPLAY_BYTES
    keyed = None
    if replayable and model_name(data) in plans.replayed:  # a model with hits filed
        keyed = replay_key(bytes(data))
        if keyed is not None:
            kept = service.replay(keyed.model, keyed.version, keyed.key)
            if kept is not None:
                done: Completion = Completion()
                done.set_result(spliced(kept, keyed.request_id))
                return done, _replayed
    request = plans.decode(data)
    done = submit_unary(service, request, trace)
    if replayable and done.done():  # a response-cache hit, answered already
        if keyed is None:
            keyed = replay_key(bytes(data))
        if keyed is not None and keyed.request_id == request.id:
            plans.replayed.add(keyed.model)
            return done, partial(finish_infer_bytes, request.id, replay=keyed)
    return done, partial(finish_infer_bytes, request.id)


def _replayed(answer: bytes | SplitMessage) -> bytes | SplitMessage:
    """The finish of a replayed request: its answer is the serialised response."""
    return answer
