"""HTTP/REST frontend: KServe v2 + Triton's binary tensor extension on asyncio + httptools.

A thin adapter: parse the request, call the service (``tritium.service.api.ServiceApi``),
encode the answer, map errors to Triton's status codes. The codec modules (``infer_decode``
with ``infer_parameters``, ``infer_inputs`` and ``raw_request``; ``infer_encode``,
``json_tensors``) are sans-IO and testable byte for byte. A connection is
``protocol.HttpProtocol``, built on ``request_reading``, ``request_handling`` and
``response_writing``.
"""

from tritium.frontends.http.infer_decode import decode_infer_request, parse_header_length
from tritium.frontends.http.infer_encode import encode_infer_response
from tritium.frontends.http.messages import HttpRequest, HttpResponse, error_response, json_response
from tritium.frontends.http.output_prefs import OutputPref, OutputPrefs
from tritium.frontends.http.raw_request import decode_raw_request
from tritium.frontends.http.router import Match, Router
from tritium.frontends.http.server import (
    DEFAULT_MAX_INPUT_SIZE,
    HttpServer,
    serve_routes,
    start_http_server,
)
from tritium.frontends.http.status import HTTP_STATUS, status_for

__all__ = [
    "DEFAULT_MAX_INPUT_SIZE",
    "HTTP_STATUS",
    "HttpRequest",
    "HttpResponse",
    "HttpServer",
    "Match",
    "OutputPref",
    "OutputPrefs",
    "Router",
    "decode_infer_request",
    "decode_raw_request",
    "encode_infer_response",
    "error_response",
    "json_response",
    "parse_header_length",
    "serve_routes",
    "start_http_server",
    "status_for",
]
