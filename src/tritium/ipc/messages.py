"""Every message between the server and a worker, declared once and used on both sides.

A message is a ``msgspec`` struct tagged by its kind (the ``op`` field on the wire) and
travels as one JSON document (see ``framing``). ``ToWorker`` lists what the server sends
(life cycle, a batch, arenas, one-way settings), ``ToServer`` what the worker sends
(replies, a batch's result, decoupled responses, notices). The items of a batch and of
its result are structs too, encoded as arrays (they repeat per request); an item that
would repeat the one before it travels as ``0`` (see ``workers/batch_messages``).

The worker's call channel (BLS and model management from model code) has its own kinds:
``FromModelCode`` (calls, and notices about streamed calls) and ``CallReply``.

Structs rather than dataclasses because they measured faster than today's orjson dicts
(and dataclasses slower): ``bench/ipc_messages.py``. A document of a kind the other side
does not know is :class:`UnknownMessage`; one whose fields do not fit its kind is
:class:`MalformedMessage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import msgspec
import numpy as np

#: ``[name, datatype, shape, nbytes]`` of one tensor in an arena (inputs and outputs);
#: a shape is sent as any sequence and arrives as a list.
TensorDesc = tuple[str, str, Sequence[int], int]


class UnknownMessage(ValueError):
    """A control message of a kind this side does not know."""


class MalformedMessage(ValueError):
    """A control message of a known kind whose fields do not fit it."""


def _kind(tag: str) -> dict[str, Any]:
    return {"tag": tag, "tag_field": "op", "omit_defaults": True}


# -- server → worker: life cycle ---------------------------------------------------------


class Load(msgspec.Struct, frozen=True, **_kind("load")):
    """Import model.py, or open the ONNX model (and auto-complete its config when asked):
    answered ``Loaded``."""

    model_name: str
    model_version: str
    model_dir: str
    config: dict[str, Any] = {}
    auto_complete: bool = False
    log_verbose: int = 0
    # --backend-config entries (backend, setting, value), for backends other than python.
    backend_config: list[list[str]] = []


class Init(msgspec.Struct, frozen=True, **_kind("init")):
    """Create and initialize the model instance: answered ``Initialized``."""

    config: dict[str, Any]
    instance_name: str
    kind: str = "CPU"
    device_id: int = 0


class Fini(msgspec.Struct, frozen=True, **_kind("fini")):
    """Run the model's ``finalize`` and exit: answered ``Bye``."""


class NewArena(msgspec.Struct, frozen=True, **_kind("arena")):
    """Take the descriptor just sent on the descriptor socket as arena ``which`` (``in``,
    ``out``, ``flags``, or ``shared`` with an ``id``); no reply."""

    which: str
    size: int
    id: int = 0


class Unmap(msgspec.Struct, frozen=True, **_kind("unmap")):
    """Let go of shared arena ``id``; no reply."""

    id: int


class LogSettings(msgspec.Struct, frozen=True, **_kind("log_settings")):
    """New logging settings, applied between two batches; no reply."""

    settings: dict[str, Any]


# -- server → worker: one batch ------------------------------------------------------------


class RequestItem(msgspec.Struct, frozen=True, array_like=True):
    """One request of a batch; its inputs lie back to back in the input arena."""

    id: str
    corr: int | str
    flags: int
    params: dict[str, Any]
    outputs: list[str] | None  # None: every output of the model
    inputs: list[TensorDesc]


class Exec(msgspec.Struct, frozen=True, **_kind("exec")):
    """Execute one batch: answered ``Result`` (or ``Need``, then ``Continue``).

    ``slots`` name the requests of a decoupled model; ``refs`` (one per input: ``[arena
    id, offset]`` or ``0``) the inputs read in place from shared arenas; ``keep`` the
    shared arena lent for the outputs; ``poll``: poll for the next batch after this one.
    """

    requests: list[RequestItem | int]
    slots: list[int] | None = None
    refs: list[list[int] | int] | None = None
    keep: int = 0
    poll: bool = False


class Continue(msgspec.Struct, frozen=True, **_kind("continue")):
    """The room a ``Need`` asked for is there (the output arena, or shared arena
    ``keep``): write the outputs."""

    keep: int = 0


# -- worker → server: replies --------------------------------------------------------------


class Loaded(msgspec.Struct, frozen=True, **_kind("loaded")):
    """model.py is imported; ``config`` after auto-complete (None when it did not run)."""

    config: dict[str, Any] | None = None


class Initialized(msgspec.Struct, frozen=True, **_kind("ready")):
    """The instance is initialized; what the model's ``is_ready()`` said."""

    ready: bool = True


class Bye(msgspec.Struct, frozen=True, **_kind("bye")):
    """``finalize`` ran; the worker exits."""


class Error(msgspec.Struct, frozen=True, **_kind("error")):
    """The message could not be carried out: a core error code name and its text."""

    code: str
    message: str


class ReplyItem(msgspec.Struct, array_like=True):
    """One request's response in a ``Result``: outputs (in the output arena, back to back
    from the start) or an error ``[code, text]``. Not frozen: the worker fills
    ``outputs`` as it writes them."""

    outputs: list[TensorDesc] | None = None
    error: tuple[str, str] | None = None
    params: dict[str, Any] | None = None


class Result(msgspec.Struct, **_kind("result")):
    """A batch's responses, one item per request; ``t``: worker-measured ns building the
    inputs, in ``execute``, writing the outputs; ``end``: bytes of outputs; ``kept``: the
    shared arena they went to; ``ready``: the model's ``is_ready()`` (when it has one).
    Not frozen: the worker adds ``ready`` after the model ran."""

    responses: list[ReplyItem | int]
    t: list[int] = []
    end: int = 0
    kept: int = 0
    ready: bool | None = None


class Need(msgspec.Struct, frozen=True, **_kind("need")):
    """The batch's outputs need ``size`` bytes: lend that much (a bigger output arena, or
    shared arena ``keep``), then send ``Continue``."""

    size: int
    keep: int = 0


# -- worker → server: unasked ------------------------------------------------------------


class Response(msgspec.Struct, **_kind("resp")):
    """One response of a decoupled model's request ``slot``. Its outputs lie at ``off``
    in the worker's response ring (a new ring of ``ring`` bytes when given: its
    descriptor came first); ``upto`` is how far the ring is used once it is read."""

    slot: int
    final: bool = False
    error: tuple[str, str] | None = None
    params: dict[str, Any] | None = None
    outputs: list[TensorDesc] | None = None
    ring: int = 0
    off: int = 0
    upto: int | None = None


class MetricUpdates(msgspec.Struct, frozen=True, **_kind("metrics")):
    """Custom-metric changes model code made, sent just before a reply."""

    updates: list[Any]


# -- the call channel: what model code asks of the server (BLS), and the answers --------
#
# A call's ``id`` (set by the worker's call client), its input tensors' descriptors and the
# size of the arena they travel in (``shm``, 0: inline) are set when it is sent, so calls
# are not frozen (see ``ipc.call_records``).


class InferCall(msgspec.Struct, **_kind("infer")):
    """``InferenceRequest.exec`` / ``async_exec``: run a request on the server."""

    model: str
    version: str = ""
    outputs: list[str] = []
    rid: str = ""
    corr: int | str = 0
    flags: int = 0
    timeout: int = 0
    params: str | dict[str, Any] = "{}"  # the request's parameters, as JSON or parsed
    decoupled: bool = False  # exec(decoupled=True): answered by a stream of replies
    id: int = 0
    inputs: list[TensorDesc] = []
    shm: int = 0


class ModelReadyCall(msgspec.Struct, **_kind("ready")):
    """``pb_utils.is_model_ready``: answered with ``value``."""

    model: str
    version: str = ""
    id: int = 0
    inputs: list[TensorDesc] = []
    shm: int = 0


class LoadModelCall(msgspec.Struct, **_kind("load")):
    """``pb_utils.load_model``."""

    model: str
    config: str = ""
    id: int = 0
    inputs: list[TensorDesc] = []
    shm: int = 0


class UnloadModelCall(msgspec.Struct, **_kind("unload")):
    """``pb_utils.unload_model``."""

    model: str
    unload_dependents: bool = False
    id: int = 0
    inputs: list[TensorDesc] = []
    shm: int = 0


class MoreAnswers(msgspec.Struct, frozen=True, **_kind("more")):
    """Model code took ``n`` more answers of streamed call ``call``; no answer."""

    call: int
    n: int


class CancelCall(msgspec.Struct, frozen=True, **_kind("cancel")):
    """Cancel streamed call ``call`` (its last answer still comes); no answer."""

    call: int


class CallReply(msgspec.Struct, omit_defaults=True):
    """The server's answer to call ``id``: outputs (inline or in an arena of ``shm``
    bytes) and parameters, ``value`` (of a management call), or an error ``[code,
    text]``; ``more``: a streamed call's answer with more to follow."""

    id: int = 0
    error: tuple[str, str] | None = None
    outputs: list[TensorDesc] | None = None
    params: dict[str, Any] | None = None
    value: Any = None
    more: bool = False
    shm: int = 0


Call = Union[InferCall, ModelReadyCall, LoadModelCall, UnloadModelCall]  # noqa: UP007
FromModelCode = Union[Call, MoreAnswers, CancelCall]  # noqa: UP007


ToWorker = Union[Load, Init, Fini, NewArena, Unmap, LogSettings, Exec, Continue]  # noqa: UP007
ToServer = Union[  # noqa: UP007
    Loaded, Initialized, Bye, Error, Result, Need, Response, MetricUpdates
]


def _encode_extra(obj: Any) -> Any:
    """numpy scalars and arrays model code put in parameters or metrics."""
    if isinstance(obj, (np.generic, np.ndarray)):
        return obj.tolist()
    raise TypeError(f"cannot send a {type(obj).__name__} in a control message")


_encoder = msgspec.json.Encoder(enc_hook=_encode_extra)
_to_worker = msgspec.json.Decoder(ToWorker)
_to_server = msgspec.json.Decoder(ToServer)
_from_model_code = msgspec.json.Decoder(FromModelCode)
_call_reply = msgspec.json.Decoder(CallReply)


def _tags(union: Any) -> frozenset[str]:
    return frozenset(kind.__struct_config__.tag for kind in union.__args__)


_WORKER_KINDS = _tags(ToWorker)
_SERVER_KINDS = _tags(ToServer)
_CALL_KINDS = _tags(FromModelCode)

#: One message's document (the frame's body).
encode = _encoder.encode


def _failed(data: Any, exc: msgspec.MsgspecError, kinds: frozenset[str], side: str) -> ValueError:
    try:
        op = msgspec.json.decode(data).get("op")
    except Exception:  # noqa: BLE001 - not even a JSON object
        return MalformedMessage(f"malformed message: {exc}")
    if op not in kinds:
        return UnknownMessage(f"unknown message kind {op!r} (from the {side})")
    return MalformedMessage(f"malformed {op!r} message: {exc}")


def decode_to_worker(data: Any) -> ToWorker:
    """A message the server sent (raises ``UnknownMessage`` / ``MalformedMessage``)."""
    try:
        return _to_worker.decode(data)
    except msgspec.MsgspecError as exc:
        raise _failed(data, exc, _WORKER_KINDS, "server") from None


def decode_to_server(data: Any) -> ToServer:
    """A message a worker sent (raises ``UnknownMessage`` / ``MalformedMessage``)."""
    try:
        return _to_server.decode(data)
    except msgspec.MsgspecError as exc:
        raise _failed(data, exc, _SERVER_KINDS, "worker") from None


def decode_call(data: Any) -> FromModelCode:
    """A record model code sent on the call channel (``UnknownMessage`` /
    ``MalformedMessage`` when it is not one)."""
    try:
        return _from_model_code.decode(data)
    except msgspec.MsgspecError as exc:
        raise _failed(data, exc, _CALL_KINDS, "model code") from None


def decode_call_reply(data: Any) -> CallReply:
    """The server's answer to a call (``MalformedMessage`` when it is not one)."""
    try:
        return _call_reply.decode(data)
    except msgspec.MsgspecError as exc:
        raise MalformedMessage(f"malformed answer to a call: {exc}") from None
