"""The gRPC shared-memory calls, transport-neutral: protobuf message in, message out.

Each function calls the :class:`~tritium.service.ServiceApi` and raises core
``TritiumError``s; a transport maps them to gRPC status codes. CUDA shared memory is
answered as a server without a CUDA runtime answers it: no region is ever listed,
unregistering is a no-op, registering is UNSUPPORTED.
"""

from __future__ import annotations

from tritonclient.grpc import service_pb2

from tritium.service.api import ServiceApi


async def system_shared_memory_status(
    service: ServiceApi, request: service_pb2.SystemSharedMemoryStatusRequest
) -> service_pb2.SystemSharedMemoryStatusResponse:
    """Every registered region (or the one ``request.name`` names), keyed by name."""
    response = service_pb2.SystemSharedMemoryStatusResponse()
    for region in service.shm_status(request.name):
        entry = response.regions[region["name"]]
        entry.name = region["name"]
        entry.key = region["key"]
        entry.offset = region["offset"]
        entry.byte_size = region["byte_size"]
    return response


async def system_shared_memory_register(
    service: ServiceApi, request: service_pb2.SystemSharedMemoryRegisterRequest
) -> service_pb2.SystemSharedMemoryRegisterResponse:
    service.shm_register(request.name, request.key, request.offset, request.byte_size)
    return service_pb2.SystemSharedMemoryRegisterResponse()


async def system_shared_memory_unregister(
    service: ServiceApi, request: service_pb2.SystemSharedMemoryUnregisterRequest
) -> service_pb2.SystemSharedMemoryUnregisterResponse:
    """Unregister ``request.name``, or every region when it is empty."""
    service.shm_unregister(request.name)
    return service_pb2.SystemSharedMemoryUnregisterResponse()


async def cuda_shared_memory_status(
    service: ServiceApi, request: service_pb2.CudaSharedMemoryStatusRequest
) -> service_pb2.CudaSharedMemoryStatusResponse:
    """Always empty; a named region answers NOT_FOUND."""
    service.cuda_shm_status(request.name)
    return service_pb2.CudaSharedMemoryStatusResponse()


async def cuda_shared_memory_register(
    service: ServiceApi, request: service_pb2.CudaSharedMemoryRegisterRequest
) -> service_pb2.CudaSharedMemoryRegisterResponse:
    """Raises Unsupported: there is no CUDA runtime to open the handle with."""
    service.cuda_shm_register(
        request.name, request.raw_handle, request.device_id, request.byte_size
    )
    return service_pb2.CudaSharedMemoryRegisterResponse()


async def cuda_shared_memory_unregister(
    service: ServiceApi, request: service_pb2.CudaSharedMemoryUnregisterRequest
) -> service_pb2.CudaSharedMemoryUnregisterResponse:
    service.cuda_shm_unregister(request.name)
    return service_pb2.CudaSharedMemoryUnregisterResponse()
