"""L4: the transport-neutral service API and the models behind it.

``Service`` is the façade the frontends call (its operations are declared once, in
``tritium.service.api``); ``server/app.py`` wires it and its collaborators."""

from tritium.service.facade import Service
from tritium.service.lifecycle.builder import LoadOptions
from tritium.service.lifecycle.manager import ModelManager
from tritium.service.model.table import ModelTable
from tritium.service.requests.streams import DecoupledCall
from tritium.service.requests.submitter import Submitter
from tritium.service.shared_memory.registry import Region, RegionLease, SharedMemoryRegistry
from tritium.service.shared_memory.tensors import RequestRegions, attach_request, write_outputs

__all__ = [
    "DecoupledCall",
    "LoadOptions",
    "ModelManager",
    "ModelTable",
    "Region",
    "RegionLease",
    "RequestRegions",
    "Service",
    "SharedMemoryRegistry",
    "Submitter",
    "attach_request",
    "write_outputs",
]
