"""JSON bodies decoded from a plan must decode exactly as a fresh parse does."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritium.core.errors import InvalidArgument
from tritium.frontends.http.infer_decode import decode_infer_request
from tritium.frontends.http.json_plans import JsonPlan

_IDS = itertools.count()


def _fresh_id() -> str:
    """Plans are shared by the process: each test uses text no other test sends."""
    return f"json-plan-{next(_IDS)}"


def _body(request_id: str, *inputs: tuple[str, str, list[int], object], **extra: object) -> bytes:
    doc: dict = {"id": request_id}
    doc.update(extra)
    doc["inputs"] = [
        {"name": name, "datatype": datatype, "shape": shape, "data": data}
        for name, datatype, shape, data in inputs
    ]
    return json.dumps(doc).encode()


def _decode(body: bytes, cache: bool = True):
    return decode_infer_request("m", "1", body, len(body), cache=cache)


def _same(a, b) -> None:
    """Two decoded requests are equal in everything the server reads."""
    ra, pa = a
    rb, pb = b
    assert (ra.id, ra.model_name, ra.model_version) == (rb.id, rb.model_name, rb.model_version)
    assert (ra.correlation_id, ra.flags, ra.priority, ra.parameters) == (
        rb.correlation_id,
        rb.flags,
        rb.priority,
        rb.parameters,
    )
    assert [o.name for o in ra.outputs or ()] == [o.name for o in rb.outputs or ()]
    assert len(ra.inputs) == len(rb.inputs)
    for x, y in zip(ra.inputs, rb.inputs):
        assert (x.name, x.datatype, tuple(x.shape), x.parameters) == (
            y.name,
            y.datatype,
            tuple(y.shape),
            y.parameters,
        )
        assert x.data.dtype == y.data.dtype and x.data.shape == y.data.shape
        np.testing.assert_array_equal(x.data, y.data)
    assert pa == pb


def _same_outcome(body: bytes) -> None:
    """``body`` decodes (or fails, with the same message) as a fresh decode of it does."""
    try:
        expected = _decode(body, cache=False)
    except InvalidArgument as exc:
        with pytest.raises(InvalidArgument) as got:
            _decode(body)
        assert got.value.message == exc.message
    else:
        _same(_decode(body), expected)


def test_second_body_with_new_numbers_is_decoded_from_the_plan():
    rid = _fresh_id()
    first = _decode(_body(rid, ("IN", "FP32", [1, 4], [1, 2, 3, 4])))
    assert isinstance(first[0].layout_key, JsonPlan)
    second_body = _body(rid, ("IN", "FP32", [1, 4], [5.5, -6, 7e3, 8]))
    second = _decode(second_body)
    assert second[0].layout_key is first[0].layout_key  # made from the plan
    assert second[0] is not first[0] and second[0].inputs[0] is not first[0].inputs[0]
    np.testing.assert_array_equal(second[0].inputs[0].data, [[5.5, -6, 7e3, 8]])
    _same(second, _decode(second_body, cache=False))


def test_several_inputs_nested_data_outputs_and_parameters_travel():
    rid = _fresh_id()

    def body(a, b):
        return _body(
            rid,
            ("A", "INT32", [2, 2], a),
            ("B", "BOOL", [3], b),
            parameters={"p": 1},
            outputs=[{"name": "OUT"}],
        )

    _decode(body([[1, 2], [3, 4]], [True, False, True]))
    again = body([[5, 6], [7, -8]], [False, False, True])
    planned = _decode(again)
    assert isinstance(planned[0].layout_key, JsonPlan)
    _same(planned, _decode(again, cache=False))
    assert (
        planned[0].parameters == {"p": 1}
        and planned[0].parameters is not _decode(again)[0].parameters
    )


def test_errors_in_planned_bodies_are_worded_as_a_fresh_decode_words_them():
    rid = _fresh_id()
    _decode(_body(rid, ("IN", "FP32", [1, 3], [1, 2, 3])))
    for data in ([1, 2], [1, 2, 3, 4], [1, True, 3], [1, "x", 3], [[1, 2], [3]], [1e400, 2, 3]):
        body = _body(rid, ("IN", "FP32", [1, 3], data))
        if data == [[1, 2], [3]]:  # nesting is flattened, as Triton does
            _same(_decode(body), _decode(body, cache=False))
            continue
        with pytest.raises(InvalidArgument) as planned:
            _decode(body)
        with pytest.raises(InvalidArgument) as fresh:
            _decode(body, cache=False)
        assert planned.value.message == fresh.value.message


def test_bodies_that_do_not_fit_the_plan_are_decoded_the_slow_way():
    rid = _fresh_id()
    template = _body(rid, ("IN", "FP32", [1, 2], [1, 2]))
    _decode(template)
    prefix, _, _ = template.partition(b"[1, 2]}")
    variants = [
        prefix + b'[1, 2], "data": [3, 4]}]}',  # a duplicate key after the array
        prefix + b'[1, 2]}], "outputs": [{"name": "X"}]}',  # more text than the plan's
        prefix + b'"text"}]}',  # no array
        prefix + b"[1, 2]",  # truncated
    ]
    for body in variants:
        _same_outcome(body)


def test_bodies_with_strings_or_a_data_key_elsewhere_get_no_plan():
    rid = _fresh_id()
    texts = _body(rid, ("T", "BYTES", [2], ["a", "b"]))
    assert not isinstance(_decode(texts)[0].layout_key, JsonPlan)
    assert not isinstance(_decode(texts)[0].layout_key, JsonPlan)
    elsewhere = _body(_fresh_id(), ("IN", "FP32", [2], [1, 2]), extra={"data": [1, 2]})
    for _ in range(2):
        request, _ = _decode(elsewhere)
        assert not isinstance(request.layout_key, JsonPlan)
        np.testing.assert_array_equal(request.inputs[0].data, [1, 2])


_NUMBER = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
_PIECE = st.one_of(
    st.lists(_NUMBER, max_size=6).map(lambda v: json.dumps(v).encode()),
    st.lists(st.lists(_NUMBER, max_size=3), max_size=3).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(
        [b"[1, 2, 3", b"[1, 2], [3", b"[true, 1, 2]", b'["a", 2, 3]', b"[1,,2]", b"[]", b"{}"]
    ),
    st.binary(max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=_PIECE, second=_PIECE)
def test_planned_decode_equals_a_fresh_decode_for_any_array_text(first: bytes, second: bytes):
    rid = "json-plan-property"
    _decode(_body(rid, ("A", "FP32", [3], [1, 2, 3]), ("B", "INT64", [1, 3], [4, 5, 6])))
    template = _body(rid, ("A", "FP32", [3], [0]), ("B", "INT64", [1, 3], [9]))
    head, rest = template.split(b"[0]", 1)
    middle, tail = rest.split(b"[9]", 1)
    fitting = head + b"[7, 8, 9]" + middle + b"[[1, 2, 3]]" + tail
    assert isinstance(_decode(fitting)[0].layout_key, JsonPlan)  # the plan is in use
    _same_outcome(head + first + middle + second + tail)


def test_many_json_strings_are_kept_serialized_with_the_same_elements():
    from tritium.core.datatypes import PackedBytes, serialize_bytes
    from tritium.frontends.http.json_tensors import PACKED_JSON_STRINGS, decode_json_data

    count = PACKED_JSON_STRINGS + 3
    texts = [f"t{i % 97}é" for i in range(count)]
    data = decode_json_data("T", "m", "BYTES", (1, count), count, texts)
    assert isinstance(data, PackedBytes) and data.shape == (1, count)
    expected = np.array([t.encode() for t in texts], dtype=object).reshape(1, count)
    assert bytes(data.raw) == serialize_bytes(expected)
    np.testing.assert_array_equal(np.asarray(data), expected)
    small = decode_json_data("T", "m", "BYTES", (2,), 2, ["a", "b"])
    assert type(small) is np.ndarray and list(small) == [b"a", b"b"]
