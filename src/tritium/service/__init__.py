"""L4: the transport-neutral service API and the models behind it."""

from tritium.service.facade import Service
from tritium.service.lifecycle.builder import LoadOptions
from tritium.service.lifecycle.manager import ModelManager
from tritium.service.requests.streams import DecoupledCall
from tritium.service.shared_memory.registry import (
    Region,
    RegionLease,
    RequestRegions,
    SharedMemoryRegistry,
    attach_request,
    write_outputs,
)

__all__ = [
    "DecoupledCall",
    "LoadOptions",
    "ModelManager",
    "Region",
    "RegionLease",
    "RequestRegions",
    "Service",
    "SharedMemoryRegistry",
    "attach_request",
    "write_outputs",
]
