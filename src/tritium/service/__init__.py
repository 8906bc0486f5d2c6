"""L4: the transport-neutral service API and the models behind it."""

from tritium.service.models import LoadOptions, ModelManager
from tritium.service.service import Service
from tritium.service.shared_memory import (
    Region,
    RegionLease,
    RequestRegions,
    SharedMemoryRegistry,
    attach_request,
    write_outputs,
)
from tritium.service.streams import DecoupledCall

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
