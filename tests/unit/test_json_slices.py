"""Huge JSON bodies read a slice at a time decode exactly as the plain decoder does:
the same tensors, or the same error message (wrong counts, values of the wrong kind,
malformed JSON with orjson's line and column). Thresholds are lowered so that small
generated documents take the sliced path.
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tritium.core.errors import InvalidArgument
from tritium.frontends.http import infer_decode, json_slices

DATATYPES = ["FP32", "FP64", "INT8", "INT32", "INT64", "UINT8", "UINT64", "BOOL", "BYTES", "FP16"]


@pytest.fixture
def small_slices(monkeypatch):
    monkeypatch.setattr(json_slices, "SLICE_BYTES", 7)
    monkeypatch.setattr(json_slices, "_WINDOW", 16)
    monkeypatch.setattr(json_slices, "_STRINGS_RUN", json_slices.strings_run(2))


def _outcome(body: bytes, sliced: bool):  # noqa: ANN202
    """(tensors, outputs, parameters) or the error message; None when the sliced reader
    handed the body back to the plain decoder."""
    try:
        if sliced:
            got = infer_decode._decode_sliced("m", "1", body, len(body))
            if got is None:
                return None
            request = got[0]
        else:
            doc = None
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise InvalidArgument(f"failed to parse the request JSON buffer: {exc}") from None
            request, _ = infer_decode._build(doc, "m", "1", body, len(body), [])
    except InvalidArgument as exc:
        return ("error", exc.message)
    tensors = [
        (t.name, t.datatype, t.shape, t.data.dtype.str, t.data.shape, t.data.tobytes())
        if t.data.dtype != object
        else (t.name, t.datatype, t.shape, t.data.tolist())
        for t in request.inputs
    ]
    outputs = None if request.outputs is None else [o.name for o in request.outputs]
    return ("ok", tensors, outputs, request.parameters, request.id)


def _same(body: bytes) -> object:
    sliced = _outcome(body, True)
    if sliced is not None:
        plain = _outcome(body, False)
        assert sliced == plain, body[:400]
    return sliced


_scalars = st.one_of(
    st.integers(-(2**65), 2**65),
    st.integers(-300, 300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e3, 1e3, width=32),
    st.booleans(),
    st.none(),
)
_nested = st.recursive(
    st.lists(_scalars, max_size=6),
    lambda inner: st.lists(inner, min_size=1, max_size=3),
    max_leaves=24,
)


# Quotes, backslashes, commas, brackets, control characters and non-ASCII in strings.
_texts = st.text(alphabet=st.sampled_from(list('ab,[]"\\ \n\x01é€😀')), max_size=6)


@st.composite
def _documents(draw) -> bytes:  # noqa: ANN001
    inputs = []
    for i in range(draw(st.integers(1, 3))):
        datatype = draw(st.sampled_from(DATATYPES))
        kind = draw(st.sampled_from(["numbers", "homogeneous", "nested", "mixed", "strings"]))
        if kind == "strings":
            data = draw(st.lists(_texts, max_size=10))
        elif kind == "homogeneous":
            count = draw(st.integers(0, 12))
            if datatype == "BOOL":
                data: list = draw(st.lists(st.booleans(), min_size=count, max_size=count))
            elif datatype in ("FP32", "FP64"):
                data = draw(st.lists(st.floats(-1e30, 1e30), min_size=count, max_size=count))
            else:
                data = draw(st.lists(st.integers(-10, 300), min_size=count, max_size=count))
        elif kind == "nested":
            data = draw(_nested)
        elif kind == "mixed":
            data = draw(st.lists(st.one_of(_scalars, st.just("s")), max_size=8))
        else:
            data = draw(st.lists(st.integers(0, 2**64), max_size=10))
        flat = len(data)
        if draw(st.booleans()):
            shape = [flat]
        else:
            shape = draw(st.lists(st.integers(0, 4), max_size=3))
        inp = {"name": f"IN{draw(st.sampled_from([i, 0]))}", "datatype": datatype, "shape": shape}
        inp["data"] = data
        if draw(st.integers(0, 9)) == 0:
            inp["parameters"] = {"binary_data_size": 4}
        inputs.append(inp)
    doc = {"id": draw(st.sampled_from(["", "é\nx", "r1"])), "inputs": inputs}
    if draw(st.booleans()):
        doc["outputs"] = [{"name": "OUT0"}]
    indent = 2 if draw(st.booleans()) else None
    text = json.dumps(doc, indent=indent, ensure_ascii=False).encode()
    # A mutation: one byte changed, dropped or added anywhere.
    if draw(st.integers(0, 2)) == 0 and text:
        at = draw(st.integers(0, len(text) - 1))
        byte = draw(st.sampled_from(list(b',[]0.e-:" }tx\n\\\x01')))
        how = draw(st.sampled_from(["set", "drop", "add"]))
        if how == "set":
            text = text[:at] + bytes([byte]) + text[at + 1 :]
        elif how == "drop":
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + bytes([byte]) + text[at:]
    return text


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_documents())
# A syntax error after a string array holding a multi-byte character: its position is
# counted in characters, as orjson does, across that array too.
@example(
    b'{"inputs": [{"name": "IN0", "datatype": "BYTES", "shape": [1], "data": ["\xc3\xa9"]},'
    b' {"name": "IN1", "datatype": "FP32", "shape": [2], "data": [0  0]}]}'
)
def test_sliced_reading_equals_the_plain_decoder(small_slices, body: bytes) -> None:  # noqa: ANN001
    _same(body)


@pytest.mark.parametrize(
    "data",
    [
        "[1,2,3,4,5,6,7,8,9,10,11,12]",
        "[[1,2],[3,4],[5,6],[7,8],[9,10],[11,12]]",
        "[ 1 , 2 ,3,4,5,6,7,8,9,10,11, 12 ]",
        "[1,2,3,4,5,6,7,8,9,10,11,,12]",
        "[1,2,3,4,5,6,7,8,9,10,11,12,]",
        "[[1,2],[3,4],[5,6],[7,8],[9,10],[11,12],]",
        "[[1,2],[3,4],[5,6],[7,8],[9,10][11,12]]",
        "[[1,2],[3,4],[5,6],[7,8],[9,10],[11,12]]]",
        "[[1,2],[3,4],[],[5,6],[7,8],[9,10],[11,12]]",
        "[1,2,3,4,5,6,7,8,9,10,11,1.e]",
        "[1,2,3,4,5,6,7,8,9,10,11,true]",
        "[1,2,3,4,5,6,7,8,9,10,11,null]",
        "[1,2,3,4,5,6,7,8,9,10,11,NaN]",
        "[1,2,3,4,5,6,7,8,9,10,11,12,13]",
        "[1,2,3,4,5,6,7,8,9,10,11]",
        "[1,2,3,4,5,6,7,8,9,10,11,1e999]",
        "[1,2,3,4,5,6,7,8,9,10,11,99999999999999999999999]",
        "[]",
    ],
)
@pytest.mark.parametrize("datatype", ["FP32", "INT8", "UINT64", "BOOL", "BYTES"])
def test_slice_cases(small_slices, data: str, datatype: str) -> None:  # noqa: ANN001
    head = '{"id":"é",\n"inputs":[{"name":"A","datatype":"' + datatype + '","shape":[12],'
    body = (head + '"data":' + data + "}]}").encode()
    _same(body)


@pytest.mark.parametrize(
    "data",
    [
        '["a","b","c","d","e","f"]',
        '[ "a" , "b\\"" ,"c,d", "[]" , "\\\\", "é€" ]',
        '["a","b","c","d","e"]',
        '["a","b","c","d","e","f","g"]',
        '["a","b","c","d","e",]',
        '["a","b",,"c","d","e","f"]',
        '["a","b","c","d","e","f"',
        '["a","b","c\\x","d","e","f"]',
        '["a","b","c\x01","d","e","f"]',
        '["a","b",3,"d","e","f"]',
        '["a","b",["c"],"d","e","f"]',
        '["a" "b","c","d","e","f"]',
    ],
)
@pytest.mark.parametrize("datatype", ["BYTES", "FP32"])
def test_string_slice_cases(small_slices, data: str, datatype: str) -> None:  # noqa: ANN001
    head = '{"id":"é",\n"inputs":[{"name":"T","datatype":"' + datatype + '","shape":[6],'
    _same((head + '"data":' + data + "}]}").encode())


def test_arrays_of_strings_are_read_a_slice_at_a_time(small_slices) -> None:  # noqa: ANN001
    texts = [f"s{i}," + "x" * i for i in range(11)]
    body = json.dumps(
        {"inputs": [{"name": "T", "datatype": "BYTES", "shape": [11], "data": texts}]}
    ).encode()
    (span,) = json_slices.find_spans(body, len(body))
    assert span.cuts is not None and len(span.cuts) == 5  # a cut after every 2 elements
    slices = list(json_slices.SpanReader(body, [span]).values(0))
    assert len(slices) > 1 and [t for piece in slices for t in piece] == texts
    outcome = _same(body)
    assert outcome is not None and outcome[0] == "ok"
    assert outcome[1][0][3] == [t.encode() for t in texts]


def test_well_formed_bodies_take_the_sliced_path(small_slices) -> None:  # noqa: ANN001
    body = b'{"inputs":[{"name":"A","datatype":"INT32","shape":[2,3],"data":[[1,2,3],[4,5,6]]}]}'
    outcome = _same(body)
    assert outcome is not None and outcome[0] == "ok"
    assert outcome[1][0][:3] == ("A", "INT32", (2, 3))


def test_a_48_mb_body_costs_its_output_array_and_a_slice() -> None:
    count = 4_000_000
    body = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, count],
                    "data": (np.arange(count, dtype=np.float32) / 4).tolist(),
                }
            ]
        }
    )
    tracemalloc.start()
    try:
        request, _ = infer_decode.decode_infer_request("m", "1", body, len(body), cache=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    data = request.inputs[0].data
    assert data.shape == (1, count) and data[0, -1] == (count - 1) / 4
    # The output array (16 MB) plus a slice's objects; the plain decoder built a list of
    # 4M Python floats (~130 MB).
    assert peak < 16e6 + 24e6, f"{peak / 1e6:.0f} MB"


_OUTPUT_CASES = [
    ("FP32", np.array([0.1, np.nan, -np.inf, 1e30, 3], np.float32)),
    ("FP64", np.array([0.1, np.inf, 2.5, -0.0, 7], np.float64)),
    ("INT8", np.array([-128, 0, 127, 5, 6], np.int8)),
    ("UINT64", np.array([2**64 - 1, 0, 1, 2, 3], np.uint64)),
    ("BOOL", np.array([True, False, True, True, False])),
]


@pytest.mark.parametrize(("datatype", "values"), _OUTPUT_CASES)
@pytest.mark.parametrize("binary_other", [False, True])
def test_big_json_outputs_are_written_as_in_one_piece(
    monkeypatch, datatype: str, values: np.ndarray, binary_other: bool
) -> None:  # noqa: ANN001
    from tritium.core.types import InferResponse, OutputTensor
    from tritium.frontends.http import infer_encode, json_tensors
    from tritium.frontends.http.output_prefs import OutputPref, OutputPrefs

    array = np.tile(values, 7).reshape(5, 7)
    response = InferResponse(
        "m",
        "1",
        outputs=[
            OutputTensor("BIG", datatype, (5, 7), array),
            OutputTensor("SMALL", "FP32", (2,), np.array([np.nan, 1], np.float32)),
            OutputTensor("OTHER", "INT32", (2,), np.array([1, 2], np.int32)),
        ],
    )
    prefs = OutputPrefs(by_name={"OTHER": OutputPref(binary=binary_other)})
    whole, whole_length = infer_encode.encode_infer_response(response, prefs)
    monkeypatch.setattr(infer_encode, "SLICED_OUTPUT_ELEMENTS", 10)
    monkeypatch.setattr(json_tensors, "OUTPUT_SLICE", 4)
    sliced, sliced_length = infer_encode.encode_infer_response(response, prefs)
    assert len(sliced) > len(whole)
    assert b"".join(sliced) == b"".join(whole)
    assert sliced_length == whole_length


def test_a_big_json_output_is_not_written_on_the_loop() -> None:
    from tritium.core.types import InferResponse, OutputTensor
    from tritium.frontends.http.infer_encode import BigJsonOutput, encode_infer_response
    from tritium.frontends.http.json_tensors import SLICED_OUTPUT_ELEMENTS
    from tritium.frontends.http.output_prefs import BINARY_PREF, OutputPrefs

    big = np.zeros(SLICED_OUTPUT_ELEMENTS, np.float32)
    response = InferResponse("m", "1", outputs=[OutputTensor("OUT", "FP32", big.shape, big)])
    with pytest.raises(BigJsonOutput):
        encode_infer_response(response, OutputPrefs(), on_loop=True)
    chunks, _ = encode_infer_response(response, OutputPrefs())  # on a thread
    assert orjson.loads(b"".join(chunks))["outputs"][0]["data"] == big.tolist()
    binary = OutputPrefs(by_name={"OUT": BINARY_PREF})
    encode_infer_response(response, binary, on_loop=True)  # binary: views, written at once
    small = big[:-1]
    response.outputs = [OutputTensor("OUT", "FP32", small.shape, small)]
    encode_infer_response(response, OutputPrefs(), on_loop=True)
