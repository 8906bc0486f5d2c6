"""Reused decoded headers must behave exactly like a fresh decode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tritium.core.errors import InvalidArgument
from tritium.frontends.http.infer_decode import decode_infer_request
from tritium.service.model.signature import signature_from_config


def _body(values: np.ndarray, *, request_id: str = "r", extra_input: bool = False) -> tuple[bytes, int]:
    inputs = [
        {"name": "IN", "datatype": "FP32", "shape": list(values.shape),
         "parameters": {"binary_data_size": values.nbytes}}
    ]
    if extra_input:
        inputs.append({"name": "B", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 7}})
    header = json.dumps(
        {"id": request_id, "inputs": inputs, "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}]}
    ).encode()
    data = values.tobytes() + (b"\x03\x00\x00\x00abc" if extra_input else b"")
    return header + data, len(header)


def test_second_decode_of_same_header_reads_new_data_into_fresh_objects():
    first_body, n = _body(np.array([1, 2, 3], np.float32))
    second_body, _ = _body(np.array([7, 8, 9], np.float32))
    r1, _ = decode_infer_request("m", "", first_body, n)
    r2, prefs = decode_infer_request("m", "", second_body, n)
    assert r1 is not r2 and r1.inputs[0] is not r2.inputs[0]
    np.testing.assert_array_equal(r1.inputs[0].data, [1, 2, 3])
    np.testing.assert_array_equal(r2.inputs[0].data, [7, 8, 9])
    assert r2.id == "r" and [o.name for o in r2.outputs] == ["OUT"]
    assert prefs.get("OUT").binary
    assert r1.layout_key is None and r2.layout_key is not None


def test_same_header_with_wrong_amount_of_data_still_fails_with_the_exact_message():
    body, n = _body(np.array([1, 2, 3], np.float32))
    decode_infer_request("m", "", body, n)
    decode_infer_request("m", "", body, n)
    with pytest.raises(InvalidArgument, match="unexpected additional input data"):
        decode_infer_request("m", "", body + b"\0\0\0\0", n)
    with pytest.raises(InvalidArgument, match="expecting 4 additional bytes"):
        decode_infer_request("m", "", body[:-4], n)


def test_bytes_inputs_are_checked_on_every_reuse():
    body, n = _body(np.array([1], np.float32), extra_input=True)
    for _ in range(2):
        request, _ = decode_infer_request("m", "", body, n)
        assert list(request.inputs[1].data) == [b"abc"]
    broken = body[:-7] + b"\x09\x00\x00\x00abc"  # length prefix longer than the data
    with pytest.raises(InvalidArgument, match="incomplete string data"):
        decode_infer_request("m", "", broken, n)


def test_validation_is_reused_only_for_the_same_layout():
    sig = signature_from_config(
        {
            "name": "m",
            "max_batch_size": 4,
            "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [3]}],
            "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]}],
        }
    )
    ok_body, n = _body(np.zeros((2, 3), np.float32))
    for _ in range(2):
        request, _ = decode_infer_request("m", "", ok_body, n)
        sig.validate(request)
        assert request.batch_size == 2
    too_big, m = _body(np.zeros((5, 3), np.float32))
    for _ in range(2):
        request, _ = decode_infer_request("m", "", too_big, m)
        with pytest.raises(InvalidArgument, match="batch-size must be <= 4"):
            sig.validate(request)


def _shm_header(region: str) -> bytes:
    return json.dumps(
        {
            "id": "s",
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [4],
                    "datatype": "FP32",
                    "parameters": {"shared_memory_region": region, "shared_memory_byte_size": 16},
                },
                {
                    "name": "INPUT1",
                    "shape": [4],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": 16},
                },
            ],
            "outputs": [
                {
                    "name": "OUTPUT0",
                    "parameters": {"shared_memory_region": region, "shared_memory_byte_size": 16},
                }
            ],
        }
    ).encode()


def test_shared_memory_requests_are_planned_like_the_slow_decode():
    from tritium.frontends.http import infer_decode

    header = _shm_header("r1")
    body = header + np.arange(4, dtype=np.float32).tobytes()
    first, _ = decode_infer_request("add_sub", "", body, len(header))
    assert infer_decode._PLANS.get(header) is not None
    second, prefs = decode_infer_request("add_sub", "", body, len(header))
    for request in (first, second):
        assert request.shared_memory
        shm_input, binary_input = request.inputs
        assert shm_input.parameters == {"shared_memory_region": "r1", "shared_memory_byte_size": 16}
        assert shm_input.data.size == 0
        assert binary_input.data.tolist() == [0, 1, 2, 3]
        assert request.outputs[0].parameters["shared_memory_region"] == "r1"
    assert prefs.by_name["OUTPUT0"].shared_memory
    # Fresh parameter dicts per request: the service may annotate them.
    assert second.inputs[0].parameters is not first.inputs[0].parameters
    assert second.outputs[0].parameters is not first.outputs[0].parameters


def test_an_all_shared_memory_body_without_binary_data_is_planned():
    from tritium.frontends.http import infer_decode

    header = json.dumps(
        {
            "inputs": [
                {
                    "name": name,
                    "shape": [4],
                    "datatype": "FP32",
                    "parameters": {"shared_memory_region": "r2", "shared_memory_byte_size": 16},
                }
                for name in ("INPUT0", "INPUT1")
            ]
        }
    ).encode()
    decode_infer_request("add_sub", "", header, len(header))
    assert infer_decode._PLANS.get(header) is not None
    request, _ = decode_infer_request("add_sub", "", header, len(header))
    assert request.shared_memory and [t.data.size for t in request.inputs] == [0, 0]


def test_json_data_requests_are_still_not_planned():
    from tritium.frontends.http import infer_decode

    header = json.dumps(
        {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.5]}]}
    ).encode()
    decode_infer_request("add_sub", "", header, len(header))
    assert infer_decode._PLANS.get(header) is None


def _compact(request_id: str | None, values: np.ndarray, extra: str = "") -> tuple[bytes, int]:
    spec = {"name": "IN", "datatype": "FP32", "shape": [values.size],
            "parameters": {"binary_data_size": values.nbytes}}
    doc = '{"inputs":[' + json.dumps(spec, separators=(",", ":")) + "]" + extra + "}"
    if request_id is not None:
        doc = '{"id":"' + request_id + '",' + doc[1:]
    header = doc.encode()
    return header + values.tobytes(), len(header)


def test_numbered_requests_share_one_plan_and_keep_their_ids():
    # perf_analyzer numbers its requests: a leading id must not defeat the plan.
    values = np.array([5, 6], np.float32)
    decoded = []
    for request_id in ("ida-1", "ida-2", None, "ida-3", "caf\u00e9"):
        body, n = _compact(request_id, values, ',"outputs":[{"name":"ida"}]')
        decoded.append(decode_infer_request("m", "", body, n)[0])
    assert [r.id for r in decoded] == ["ida-1", "ida-2", "", "ida-3", "caf\u00e9"]
    plans = {id(r.layout_key) for r in decoded[1:]}
    assert len(plans) == 1 and decoded[1].layout_key is not None
    for request in decoded:
        np.testing.assert_array_equal(request.inputs[0].data, values)


def test_ids_that_are_not_plain_strings_decode_exactly():
    values = np.array([1], np.float32)
    for request_id, expected in (('a\\"b', 'a"b'), ("t\\u0041b", "tAb")):
        for _ in range(2):
            body, n = _compact(request_id, values, ',"outputs":[{"name":"esc"}]')
            assert decode_infer_request("m", "", body, n)[0].id == expected
    # A second "id" member wins, as in the JSON parser.
    header = b'{"id":"one","id":"two","inputs":[{"name":"IN","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}],"outputs":[{"name":"dup"}]}'
    for _ in range(3):
        request, _ = decode_infer_request("m", "", header + values.tobytes(), len(header))
        assert request.id == "two"
