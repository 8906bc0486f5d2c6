"""gRPC frontend: Triton's ``GRPCInferenceService`` (protos from tritonclient).

The protocol modules (``infer_codec``, ``messages``, ``status``) are sans-IO and shared
by transports, ``calls`` is the method table both transports serve (its inference calls
in ``infer_calls``): ``native`` is
the default HTTP/2 transport; ``servicer`` (method handlers over ``calls``) and
``server`` (start-up options) are the grpc.aio reference transport.
"""

from tritium.frontends.grpc.calls import METHODS, Method
from tritium.frontends.grpc.infer_calls import InferStream, call_status, model_stream_infer
from tritium.frontends.grpc.infer_codec import (
    decode_infer_request,
    encode_infer_response,
    parameter_value,
    parameters_to_dict,
    set_parameter,
)
from tritium.frontends.grpc.messages import (
    model_config_response,
    model_metadata_response,
    model_statistics_response,
    server_metadata_response,
)
from tritium.frontends.grpc.options import (
    MAX_MESSAGE_LENGTH,
    GrpcOptions,
    KeepaliveOptions,
    TlsFiles,
)
from tritium.frontends.grpc.server import GrpcServer, start_grpc_server
from tritium.frontends.grpc.servicer import (
    add_methods_to_server,
    grpc_status_code,
    method_handlers,
)
from tritium.frontends.grpc.status import GRPC_STATUS, grpc_status_for

__all__ = [
    "GRPC_STATUS",
    "MAX_MESSAGE_LENGTH",
    "METHODS",
    "Method",
    "GrpcOptions",
    "GrpcServer",
    "InferStream",
    "KeepaliveOptions",
    "TlsFiles",
    "add_methods_to_server",
    "call_status",
    "decode_infer_request",
    "encode_infer_response",
    "grpc_status_code",
    "grpc_status_for",
    "model_config_response",
    "model_metadata_response",
    "method_handlers",
    "model_statistics_response",
    "model_stream_infer",
    "parameter_value",
    "parameters_to_dict",
    "server_metadata_response",
    "set_parameter",
    "start_grpc_server",
]
