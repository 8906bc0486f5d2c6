"""The system shared-memory registry and request resolution (Triton's shm extension).

Regions are backed by files in a temporary folder standing in for /dev/shm (mmap treats
both alike), except one test that goes through the real /dev/shm with tritonclient's
helpers. Texts are Triton's (``shared_memory_manager.cc``, checked against Triton 2.51).
"""

from __future__ import annotations

import mmap
import os
import uuid

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from tritium.core.datatypes import serialize_bytes
from tritium.core.errors import AlreadyExists, InternalError, InvalidArgument, NotFound
from tritium.core.types import (
    InferRequest,
    InferResponse,
    InputTensor,
    OutputTensor,
    RequestedOutput,
)
from tritium.frontends.grpc.infer_codec import decode_infer_request, encode_infer_response
from tritium.frontends.http.infer_decode import decode_infer_request as http_decode
from tritium.frontends.http.infer_encode import encode_infer_response as http_encode
from tritium.frontends.http.output_prefs import OutputPref, OutputPrefs
from tritium.service.shared_memory.registry import UINT64_MAX, SharedMemoryRegistry
from tritium.service.shared_memory.tensors import attach_request, write_outputs

PAGE = mmap.ALLOCATIONGRANULARITY


@pytest.fixture
def shm_dir(tmp_path):
    return tmp_path


@pytest.fixture
def registry(shm_dir):
    reg = SharedMemoryRegistry(str(shm_dir))
    yield reg
    reg.close()


def make_object(shm_dir, key: str, data: bytes | int) -> None:
    with open(shm_dir / key.lstrip("/"), "wb") as f:
        f.write(bytes(data) if isinstance(data, int) else data)


# ------------------------------------------------------------------ registry


def test_register_status_unregister_round_trip(registry, shm_dir):
    make_object(shm_dir, "/obj", 64)
    registry.register("b", "/obj", 0, 64)
    registry.register("a", "obj", 16, 32)  # shm_open accepts the key without its '/'
    # Sorted by name, each with the key exactly as given (Triton's status JSON).
    assert registry.status() == [
        {"name": "a", "key": "obj", "offset": 16, "byte_size": 32},
        {"name": "b", "key": "/obj", "offset": 0, "byte_size": 64},
    ]
    assert registry.status("b") == [{"name": "b", "key": "/obj", "offset": 0, "byte_size": 64}]
    registry.unregister("b")
    assert [r["name"] for r in registry.status()] == ["a"]
    registry.unregister("never-registered")  # Triton answers success
    registry.unregister_all()
    assert registry.status() == []


def test_status_of_unknown_region_is_not_found(registry):
    with pytest.raises(NotFound, match=r"^Unable to find system shared memory region: 'zz'$"):
        registry.status("zz")


def test_registering_an_existing_name_is_already_exists(registry, shm_dir):
    make_object(shm_dir, "/obj", 8)
    registry.register("r", "/obj", 0, 8)
    with pytest.raises(AlreadyExists, match=r"^shared memory region 'r' already in manager$"):
        registry.register("r", "/obj", 0, 8)


def test_missing_object_is_internal_with_tritons_text(registry):
    with pytest.raises(InternalError, match=r"^Unable to open shared memory region: '/nope'$"):
        registry.register("r", "/nope", 0, 8)


@pytest.mark.parametrize(
    "key", ["", "/", "a/b", "/a/b", "..", "/..", ".", "x" * 256, "a\x00b", 7, None]
)
def test_bad_keys_are_rejected(registry, key):
    with pytest.raises(InvalidArgument, match="failed to register shared memory region 'r'"):
        registry.register("r", key, 0, 8)


@pytest.mark.parametrize("key", ["tritium_arena_1", "/tritium0", "/TRITIUM-x"])
def test_reserved_keys_are_refused_without_echoing_them(registry, shm_dir, key):
    make_object(shm_dir, key, 8)
    with pytest.raises(InvalidArgument) as info:
        registry.register("r", key, 0, 8)
    assert "reserved" in info.value.message
    assert key.lstrip("/") not in info.value.message
    assert len(registry) == 0


@pytest.mark.parametrize("name", ["", "a/b", "..", ".", "n" * 256, "tab\there", 3])
def test_bad_names_are_rejected(registry, shm_dir, name):
    make_object(shm_dir, "/obj", 8)
    with pytest.raises(InvalidArgument):
        registry.register(name, "/obj", 0, 8)


@pytest.mark.parametrize(
    ("offset", "size"),
    [(0, 65), (60, 8), (64, 1), (0, 0), (UINT64_MAX, 2), (2**63, 2**63), (1, UINT64_MAX)],
)
def test_out_of_bounds_registration_is_invalid_args(registry, shm_dir, offset, size):
    make_object(shm_dir, "/obj", 64)
    with pytest.raises(
        InvalidArgument, match=r"^failed to register shared memory region 'r': invalid args$"
    ):
        registry.register("r", "/obj", offset, size)
    assert len(registry) == 0


@pytest.mark.parametrize(("offset", "size"), [(-1, 8), (0, -8), (2**64, 8), (0, 2**64), (True, 8)])
def test_offsets_and_sizes_must_be_uint64(registry, shm_dir, offset, size):
    make_object(shm_dir, "/obj", 64)
    with pytest.raises(InvalidArgument, match="unsigned 64-bit integer"):
        registry.register("r", "/obj", offset, size)


def test_symlinks_are_not_followed(registry, shm_dir, tmp_path_factory):
    target = tmp_path_factory.mktemp("elsewhere") / "secret"
    target.write_bytes(b"\0" * 64)
    os.symlink(target, shm_dir / "link")
    with pytest.raises(InternalError, match="Unable to open"):
        registry.register("r", "/link", 0, 64)


def test_unaligned_offset_maps_the_right_bytes(registry, shm_dir):
    data = bytes(range(256)) * (3 * PAGE // 256)
    make_object(shm_dir, "/obj", data)
    registry.register("r", "/obj", PAGE + 5, PAGE)
    lease = registry.lease()
    region = registry.acquire(lease, "r")
    assert bytes(region.view(3, 10)) == data[PAGE + 8 : PAGE + 18]
    lease.release()


# ---------------------------------------------------------------- view checks


@pytest.fixture
def region(registry, shm_dir):
    make_object(shm_dir, "/obj", 64)
    registry.register("r", "/obj", 0, 64)
    lease = registry.lease()
    yield registry.acquire(lease, "r")
    lease.release()


@pytest.mark.parametrize(
    ("offset", "size", "text"),
    [
        (64, 1, "Invalid offset for shared memory region: 'r'"),
        (UINT64_MAX - 8, 4, "Invalid offset for shared memory region: 'r'"),
        (60, 8, "Invalid offset + byte size for shared memory region: 'r'"),
        (0, None, "Invalid offset + byte size for shared memory region: 'r'"),
        (
            1,
            UINT64_MAX,
            f"Integer overflow detected: byte_size ({UINT64_MAX}) + offset (1) exceeds maximum "
            f"value ({UINT64_MAX}) for region 'r'",
        ),
    ],
)
def test_view_bounds_use_tritons_texts(region, offset, size, text):
    with pytest.raises(InvalidArgument) as info:
        region.view(offset, size)
    assert info.value.message == text


def test_view_of_a_truncated_object_fails_instead_of_crashing(region, shm_dir):
    os.truncate(shm_dir / "obj", 16)
    with pytest.raises(InvalidArgument, match="truncated"):
        region.view(0, 8)


def test_acquire_unknown_region_is_not_found(registry):
    with pytest.raises(NotFound, match=r"^Unable to find shared memory region: 'zz'$"):
        registry.acquire(registry.lease(), "zz")


# ------------------------------------------------------------ reference counts


def test_unregister_while_leased_keeps_the_mapping_until_release(registry, shm_dir):
    make_object(shm_dir, "/obj", b"abcdefgh")
    registry.register("r", "/obj", 0, 8)
    lease = registry.lease()
    region = registry.acquire(lease, "r")
    registry.acquire(lease, "r")  # one lease counts a region once
    assert region.users == 1
    registry.unregister("r")
    # The name is gone at once (and free again), the mapping is not.
    with pytest.raises(NotFound):
        registry.status("r")
    registry.register("r", "/obj", 0, 4)
    assert not region.closed
    assert bytes(region.view(0, 8)) == b"abcdefgh"
    region.view(0, 8)[:2] = b"XY"
    lease.release()
    lease.release()  # idempotent
    assert region.closed and region.users == 0
    assert (shm_dir / "obj").read_bytes() == b"XYcdefgh"


def test_release_of_a_registered_region_keeps_it_open(registry, shm_dir):
    make_object(shm_dir, "/obj", 8)
    registry.register("r", "/obj", 0, 8)
    first, second = registry.lease(), registry.lease()
    region = registry.acquire(first, "r")
    registry.acquire(second, "r")
    assert region.users == 2
    first.release()
    second.release()
    assert region.users == 0 and not region.closed
    registry.unregister("r")
    assert region.closed


def test_close_with_a_live_view_defers_the_unmap(registry, shm_dir):
    make_object(shm_dir, "/obj", b"12345678")
    registry.register("r", "/obj", 0, 8)
    lease = registry.lease()
    view = registry.acquire(lease, "r").view(0, 8)
    registry.unregister("r")
    lease.release()  # the mapping cannot close while ``view`` exists: no crash, still valid
    assert bytes(view) == b"12345678"


def test_real_dev_shm_with_tritonclient_helpers():
    import tritonclient.utils.shared_memory as shm

    key = f"/shmtest_unit_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    handle = shm.create_shared_memory_region("unit", key, 32)
    registry = SharedMemoryRegistry()
    try:
        shm.set_shared_memory_region(handle, [np.arange(8, dtype=np.float32)])
        registry.register("r", key, 0, 32)
        lease = registry.lease()
        view = registry.acquire(lease, "r").view(0, 32)
        assert np.array_equal(np.frombuffer(view, np.float32), np.arange(8, dtype=np.float32))
        del view
        lease.release()
    finally:
        registry.close()
        shm.destroy_shared_memory_region(handle)
    assert not os.path.exists("/dev/shm" + key)


# ---------------------------------------------------------- request resolution


def shm_params(region: str, size: int | None, offset: int | None = None) -> dict:
    params: dict = {"shared_memory_region": region}
    if size is not None:
        params["shared_memory_byte_size"] = size
    if offset is not None:
        params["shared_memory_offset"] = offset
    return params


@pytest.fixture
def io_registry(registry, shm_dir):
    payload = np.arange(4, dtype=np.float32).tobytes() + serialize_bytes(
        np.array([b"ab", b"cde"], dtype=np.object_)
    )
    make_object(shm_dir, "/in", payload + b"\0" * (64 - len(payload)))
    make_object(shm_dir, "/out", 64)
    registry.register("in", "/in", 0, 64)
    registry.register("out", "/out", 0, 64)
    return registry


def test_attach_reads_fixed_and_bytes_inputs(io_registry):
    request = InferRequest("m", inputs=[
        InputTensor("A", "FP32", (2, 2), np.empty(0), shm_params("in", 16)),
        InputTensor("S", "BYTES", (2,), np.empty(0), shm_params("in", 13, 16)),
    ])
    used = attach_request(io_registry, request)
    a, s = request.inputs
    assert a.data.shape == (2, 2) and not a.data.flags.writeable
    assert np.array_equal(a.data.reshape(-1), np.arange(4, dtype=np.float32))
    assert list(s.data) == [b"ab", b"cde"]
    used.lease.release()


def test_input_size_mismatch_has_the_request_tag(io_registry):
    request = InferRequest("m", id="7", inputs=[
        InputTensor("A", "FP32", (4,), np.empty(0), shm_params("in", 12)),
    ])
    with pytest.raises(InvalidArgument) as info:
        attach_request(io_registry, request)
    assert info.value.message == (
        "[request id: 7] input byte size mismatch for input 'A' for model 'm'. Expected 16, "
        "got 12"
    )


def test_failed_attach_releases_what_it_acquired(io_registry):
    lease = io_registry.lease()
    region = io_registry.acquire(lease, "in")
    request = InferRequest("m", inputs=[
        InputTensor("A", "FP32", (4,), np.empty(0), shm_params("in", 16)),
    ], outputs=[RequestedOutput("O", shm_params("out", 16, 60))])
    with pytest.raises(InvalidArgument, match="Invalid offset \\+ byte size"):
        attach_request(io_registry, request)
    assert region.users == 1  # only the test's own lease
    lease.release()


def test_unknown_region_and_bad_parameter_types(io_registry):
    bad = InferRequest("m", inputs=[InputTensor("A", "FP32", (4,), np.empty(0), shm_params("zz", 16))])
    with pytest.raises(NotFound, match="Unable to find shared memory region: 'zz'"):
        attach_request(io_registry, bad)
    bad = InferRequest("m", inputs=[InputTensor("A", "FP32", (4,), np.empty(0), shm_params("in", -1))])
    with pytest.raises(InvalidArgument, match="unsigned 64-bit"):
        attach_request(io_registry, bad)


def test_outputs_are_written_and_marked(io_registry, shm_dir):
    request = InferRequest("m", outputs=[
        RequestedOutput("O", shm_params("out", 16, 8)),
        RequestedOutput("S", shm_params("out", 20, 32)),
        RequestedOutput("P"),
    ])
    used = attach_request(io_registry, request)
    response = InferResponse("m", "1", outputs=[
        OutputTensor("O", "INT32", (4,), np.array([1, 2, 3, 4], np.int32)),
        OutputTensor("S", "BYTES", (1,), np.array([b"hey"], np.object_)),
        OutputTensor("P", "INT32", (1,), np.array([9], np.int32)),
    ])
    write_outputs(response, used)
    used.lease.release()
    assert response.error is None
    assert [o.shared_memory for o in response.outputs] == [True, True, False]
    content = (shm_dir / "out").read_bytes()
    assert content[8:24] == np.array([1, 2, 3, 4], "<i4").tobytes()
    assert content[32:39] == b"\x03\x00\x00\x00hey"


def test_output_larger_than_its_region_is_tritons_internal_error(io_registry):
    request = InferRequest("m", outputs=[RequestedOutput("O", shm_params("out", 8))])
    used = attach_request(io_registry, request)
    response = InferResponse("m", "1", outputs=[
        OutputTensor("O", "FP32", (4,), np.zeros(4, np.float32)),
    ])
    write_outputs(response, used)
    used.lease.release()
    assert isinstance(response.error, InternalError)
    assert response.error.message == (
        "shared memory size specified with the request for output 'O' (8 bytes) should be at "
        "least 16 bytes to hold the results"
    )


# ------------------------------------------------------------------ frontends


def test_grpc_decode_marks_shm_and_maps_raw_contents_to_the_other_inputs():
    message = service_pb2.ModelInferRequest(model_name="m")
    a = message.inputs.add(name="A", datatype="FP32", shape=[1])
    a.parameters["shared_memory_region"].string_param = "r"
    a.parameters["shared_memory_byte_size"].int64_param = 4
    message.inputs.add(name="B", datatype="FP32", shape=[1])
    message.raw_input_contents.append(np.array([2.5], np.float32).tobytes())
    out = message.outputs.add(name="O")
    out.parameters["shared_memory_region"].string_param = "r"
    request = decode_infer_request(message)
    assert request.shared_memory
    assert request.inputs[0].parameters == {
        "shared_memory_region": "r", "shared_memory_byte_size": 4
    }
    assert request.inputs[1].data.tolist() == [2.5]
    assert request.outputs[0].parameters == {"shared_memory_region": "r"}


def test_grpc_plain_request_is_not_marked():
    message = service_pb2.ModelInferRequest(model_name="m")
    message.inputs.add(name="A", datatype="FP32", shape=[1])
    message.raw_input_contents.append(b"\0" * 4)
    assert not decode_infer_request(message).shared_memory


def test_grpc_encode_keeps_an_empty_raw_entry_for_shm_outputs():
    response = InferResponse("m", "1", outputs=[
        OutputTensor("A", "INT32", (1,), np.array([1], np.int32), shared_memory=True),
        OutputTensor("B", "INT32", (1,), np.array([2], np.int32)),
    ])
    message = encode_infer_response(response)
    assert list(message.raw_output_contents) == [b"", np.array([2], "<i4").tobytes()]


def test_http_decode_marks_shm_requests_also_when_their_header_plan_is_reused():
    header = (
        b'{"inputs":[{"name":"A","datatype":"FP32","shape":[1],"parameters":'
        b'{"shared_memory_region":"r","shared_memory_byte_size":4}},'
        b'{"name":"B","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}'
    )
    body = header + b"\0" * 4
    keys = []
    for _ in range(3):
        request, _ = http_decode("m", "", body, len(header))
        assert request.shared_memory
        assert request.inputs[0].parameters["shared_memory_region"] == "r"
        keys.append(request.layout_key)
    # The first decode makes the plan; the next ones are built from it.
    assert keys[0] is None and keys[1] is not None and keys[2] is keys[1]
    plain = b'{"inputs":[{"name":"B","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}'
    request, _ = http_decode("m", "", plain + b"\0" * 4, len(plain))
    assert not request.shared_memory


def test_http_encode_sends_no_data_for_outputs_in_shm():
    response = InferResponse("m", "1", outputs=[
        OutputTensor("A", "FP32", (1,), np.zeros(1, np.float32), shared_memory=True),
    ])
    chunks, length = http_encode(response, OutputPrefs(by_name={"A": OutputPref()}))
    assert length is None
    assert b"".join(chunks) == (
        b'{"model_name":"m","model_version":"1","outputs":[{"name":"A","datatype":"FP32",'
        b'"shape":[1]}]}'
    )
