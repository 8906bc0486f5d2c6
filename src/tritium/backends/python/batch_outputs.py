"""The responses model code returned for one batch, as a ``Result``'s items and outputs.

:func:`collect` checks every response and places its outputs back to back (aligned) from
the start of the output arena; :func:`write_outputs` writes them once there is room.
Everything model code can get wrong becomes an error item for its request.
"""

from __future__ import annotations

from typing import Any

from tritium.backends.python import pb_utils
from tritium.backends.python.output_checks import OutputChecks
from tritium.backends.python.pb_utils_errors import describe, error_pair
from tritium.backends.python.pb_utils_logger import log_exception
from tritium.core.datatypes import serialize_bytes
from tritium.ipc import Arena
from tritium.ipc import tensors as ipc_tensors
from tritium.ipc.arena import ALIGN_MASK
from tritium.ipc.messages import ReplyItem


def collect(
    result: Any, requests: list[Any], instance_name: str, checks: OutputChecks
) -> tuple[list[ReplyItem], list[Any], int]:
    """Per-request replies, and every output to write with its aligned arena offset:
    ``(offset, reply index, name, wire, shape, array, raw)``; plus the arena end. Outputs
    unlike the config are warned about through ``checks``."""
    n = len(requests)
    if not isinstance(result, (list, tuple)) or len(result) != n:
        if isinstance(result, (list, tuple)):
            got = str(len(result))
        elif result is None:
            got = "None: execute must return a list with one InferenceResponse per request"
        else:
            got = f"a {type(result).__name__} where a list of InferenceResponse objects belongs"
        message = (
            f"Number of InferenceResponse objects do not match the number of requests "
            f"for model instance '{instance_name}': expected {n} responses, got {got}"
        )
        return [ReplyItem(error=("INTERNAL", message)) for _ in range(n)], [], 0
    replies: list[ReplyItem] = []
    placed: list[Any] = []
    pos = 0
    response_type = pb_utils.InferenceResponse
    for index, (response, request) in enumerate(zip(result, requests)):
        # The pb_utils objects are tritium's own: read their fields directly, this
        # loop runs for every response.
        if type(response) is not response_type and not isinstance(response, response_type):
            replies.append(
                ReplyItem(
                    error=(
                        "INTERNAL",
                        f"Expected an 'InferenceResponse' object in the execute function return "
                        f"list, found type '{type(response).__name__}'",
                    )
                )
            )
            continue
        err = response._error
        if err is not None:
            replies.append(ReplyItem(error=error_pair(err)))
            continue
        wanted = request._requested_output_names
        outputs = []
        start = pos
        try:
            for tensor in response._output_tensors:
                name = tensor._name
                if name not in wanted:
                    checks.not_in_config(name)
                    continue
                wire = tensor._datatype
                array = tensor._array  # BF16: the raw uint16 words
                checks.check(name, wire, array.shape)
                if wire == "BYTES":
                    raw = serialize_bytes(array)
                    size = len(raw)
                else:
                    raw = None
                    size = array.nbytes
                outputs.append((pos, index, name, wire, array.shape, array, raw))
                pos = (pos + size + ALIGN_MASK) & ~ALIGN_MASK
        except Exception as exc:  # noqa: BLE001
            log_exception()
            pos = start
            replies.append(
                ReplyItem(error=("INTERNAL", f"invalid output from model: {describe(exc)}"))
            )
            continue
        params = response._parameters_dict
        replies.append(ReplyItem([], None, params or None))
        placed.extend(outputs)
    return replies, placed, pos


def write_outputs(
    replies: list[ReplyItem], placed: list[Any], arena: Arena
) -> list[ReplyItem | int]:
    """Write the outputs (back to back from the arena's start, as :func:`collect` placed
    them); the result's items, where one that repeats the one before is sent as ``0``."""
    buf = arena.buf
    assert buf is not None
    write = ipc_tensors.write
    for off, index, name, wire, shape, array, raw in placed:
        nbytes = write(buf, off, array, raw)
        replies[index].outputs.append((name, wire, shape, nbytes))  # type: ignore[union-attr]
    items: list[ReplyItem | int] = []
    last = None
    for reply in replies:
        items.append(0 if reply == last else reply)
        last = reply
    return items
