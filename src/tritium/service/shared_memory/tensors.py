"""A request's tensors in client shared-memory regions: reading its inputs from them and
writing its outputs into them, under one lease of the regions it names.

Requests name a region with the ``shared_memory_region`` parameter (and
``shared_memory_byte_size``, ``shared_memory_offset``); texts and codes are Triton's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tritium.core.datatypes import element_count, raw_dtype, tensor_from_bytes, wire_bytes
from tritium.core.errors import InternalError, InvalidArgument
from tritium.core.types import InferRequest, InferResponse
from tritium.service.shared_memory.registry import (
    UINT64_MAX,
    Region,
    RegionLease,
    SharedMemoryRegistry,
)

_REGION = "shared_memory_region"
_SIZE = "shared_memory_byte_size"
_OFFSET = "shared_memory_offset"


@dataclass(frozen=True, slots=True)
class _Target:
    region: Region
    offset: int
    byte_size: int


class RequestRegions:
    """What one request uses: its lease, and where each shared-memory output goes."""

    __slots__ = ("lease", "outputs")

    def __init__(self, lease: RegionLease) -> None:
        self.lease = lease
        self.outputs: dict[str, _Target] = {}


def _region_params(params: dict, what: str, name: str) -> tuple[str, int, int | None]:
    region = params[_REGION]
    if type(region) is not str:
        raise InvalidArgument(f"{what} '{name}': '{_REGION}' must be a string")
    size = params.get(_SIZE)
    offset = params.get(_OFFSET, 0)
    for key, value in ((_SIZE, size), (_OFFSET, offset)):
        if value is not None and (type(value) is not int or value < 0 or value > UINT64_MAX):
            raise InvalidArgument(
                f"{what} '{name}': '{key}' must be an unsigned 64-bit integer, got {value!r}"
            )
    return region, offset, size


def attach_request(registry: SharedMemoryRegistry, request: InferRequest) -> RequestRegions:
    """Read ``request``'s shared-memory inputs and check its shared-memory outputs.

    Fixed-size inputs become read-only numpy views over the region (no copy); BYTES
    inputs are checked and kept in their length-prefixed form over it (no copy either). The regions stay leased
    until the returned object's ``lease`` is released.
    """
    used = RequestRegions(registry.lease())
    try:
        for tensor in request.inputs:
            params = tensor.parameters
            if _REGION not in params:
                continue
            region_name, offset, size = _region_params(params, "input", tensor.name)
            region = registry.acquire(used.lease, region_name)
            view = region.view(offset, size)
            try:
                data = tensor_from_bytes(
                    tensor.name,
                    request.model_name,
                    tensor.datatype,
                    tuple(tensor.shape),
                    element_count(tensor.shape),
                    view,
                )
            except InvalidArgument as exc:
                if exc.message.startswith("incomplete string data"):
                    raise  # the one message Triton leaves without the request tag
                tag = f"[request id: {request.id or '<id_unknown>'}] "
                raise InvalidArgument(tag + exc.message) from None
            if data.dtype != object:
                data.flags.writeable = False  # the model sees a copy; this view is the client's
            tensor.data = data
        for out in request.outputs or ():
            params = out.parameters
            if _REGION not in params:
                continue
            region_name, offset, size = _region_params(params, "output", out.name)
            region = registry.acquire(used.lease, region_name)
            region.view(offset, size)  # bounds are checked before the model runs, as Triton
            used.outputs[out.name] = _Target(region, offset, size or 0)
    except BaseException:
        used.lease.release()
        raise
    return used


def write_outputs(response: InferResponse, used: RequestRegions) -> None:
    """Copy the response's shared-memory outputs into their regions and mark them.

    A result larger than its region sets ``response.error`` (Triton's INTERNAL text).
    """
    for out in response.outputs:
        target = used.outputs.get(out.name)
        if target is None:
            continue
        if out.datatype == "BYTES":
            raw: bytes | memoryview = wire_bytes(out.data)
        else:
            array = np.ascontiguousarray(out.data, dtype=raw_dtype(out.datatype))
            raw = array.reshape(-1).data.cast("B") if array.size else b""
        size = len(raw)
        if size > target.byte_size:
            response.error = InternalError(
                f"shared memory size specified with the request for output '{out.name}' "
                f"({target.byte_size} bytes) should be at least {size} bytes to hold the "
                "results"
            )
            return
        if size:
            target.region.view(target.offset, target.byte_size)[:size] = raw
        out.shared_memory = True
