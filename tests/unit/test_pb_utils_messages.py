"""pb_utils InferenceRequest / InferenceResponse / TritonError, pinned to Triton 2.51's behaviour."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from tritium.backends.python import pb_utils
from tritium.backends.python.pb_utils import (
    InferenceRequest,
    InferenceResponse,
    Tensor,
    TritonError,
    TritonModelException,
)
from tritium.core.errors import Code


def _t(name: str = "a") -> Tensor:
    return Tensor(name, np.zeros(2, dtype=np.float32))


# -- TritonError ------------------------------------------------------------------------


def test_error_codes_have_tritonserver_values():
    expected = {
        "UNKNOWN": 0,
        "INTERNAL": 1,
        "NOT_FOUND": 2,
        "INVALID_ARG": 3,
        "UNAVAILABLE": 4,
        "UNSUPPORTED": 5,
        "ALREADY_EXISTS": 6,
        "CANCELLED": 7,
    }
    for name, value in expected.items():
        code = getattr(TritonError, name)
        assert code == value
        assert int(code) == value
        # names line up with the server's error tree, so the worker can map by name
        assert Code[code.name].name == name


def test_error_defaults_to_internal():
    err = TritonError("boom")
    assert err.message() == "boom"
    assert err.code() == TritonError.INTERNAL == 1


def test_error_with_code():
    err = TritonError(message="missing", code=TritonError.NOT_FOUND)
    assert err.code() == 2
    assert TritonError("x", 3).code() == TritonError.INVALID_ARG


def test_error_is_not_an_exception_and_rejects_bad_args():
    assert not isinstance(TritonError("x"), BaseException)
    with pytest.raises(TypeError):
        TritonError(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TritonError("x", 99)


def test_model_exception_is_an_exception():
    assert issubclass(TritonModelException, Exception)
    assert str(TritonModelException("boom")) == "boom"


# -- InferenceResponse ------------------------------------------------------------------


def test_response_defaults():
    r = InferenceResponse()
    assert r.output_tensors() == []
    assert r.has_error() is False
    assert r.error() is None
    assert r.parameters() == "{}"


def test_response_tensors_positional_and_tuple():
    a, b = _t("a"), _t("b")
    assert InferenceResponse([a, b], None).output_tensors() == [a, b]
    assert InferenceResponse(output_tensors=(a,)).output_tensors() == [a]


def test_response_with_error():
    r = InferenceResponse(output_tensors=[], error=TritonError("bad", TritonError.INVALID_ARG))
    assert r.has_error()
    assert r.error().message() == "bad"
    assert r.error().code() == TritonError.INVALID_ARG


def test_response_parameters_as_triton_json():
    r = InferenceResponse(parameters={"a": 1, "b": "x", "c": True})
    # Python's json.dumps layout, as Triton produces for model-supplied parameters
    assert r.parameters() == '{"a": 1, "b": "x", "c": true}'
    assert r._parameters_dict == {"a": 1, "b": "x", "c": True}


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (
            {"a": 1.5},
            "Expect parameters values to have type bool/int/str, found type <class 'float'>",
        ),
        ({"a": None}, "Expect parameters values to have type bool/int/str"),
        ({"a": np.int64(1)}, "Expect parameters values to have type bool/int/str"),
        ({1: 1}, "Expect parameters keys to have type str, found type <class 'int'>"),
        ([("a", 1)], "Expect dict, got <class 'list'>"),
    ],
)
def test_response_parameters_validated(parameters, message):
    with pytest.raises(TritonModelException, match=message.replace("(", r"\(").replace(")", r"\)")):
        InferenceResponse(parameters=parameters)


def test_response_rejects_non_tensors_and_bad_error():
    with pytest.raises(TypeError):
        InferenceResponse(output_tensors=[np.zeros(1)])
    with pytest.raises(TypeError):
        InferenceResponse(error="bad")  # type: ignore[arg-type]


def test_get_output_tensor_by_name():
    a, b = _t("a"), _t("b")
    r = InferenceResponse([a, b])
    assert pb_utils.get_output_tensor_by_name(r, "b") is b
    assert pb_utils.get_output_tensor_by_name(r, "zz") is None


# -- InferenceRequest built by a model --------------------------------------------------


def test_request_constructor_defaults():
    q = InferenceRequest(model_name="m", inputs=[_t()], requested_output_names=["o"])
    assert q.request_id() == ""
    assert q.correlation_id() == 0
    assert q.flags() == 0
    assert q.timeout() == 0
    assert q.parameters() == "{}"
    assert q.requested_output_names() == {"o"}
    assert q.model_name() == "m"
    assert [t.name() for t in q.inputs()] == ["a"]
    assert q.is_cancelled() is False
    assert q.trace().get_context() is None


def test_request_positional_order_is_tritons():
    q = InferenceRequest("rid", 5, [], ["x"], "m", 2, 1, 100)
    assert q.request_id() == "rid"
    assert q.correlation_id() == 5
    assert q.requested_output_names() == {"x"}
    assert q.model_name() == "m"
    assert q.flags() == 1
    assert q.timeout() == 100


def test_request_string_correlation_id_and_parameters():
    q = InferenceRequest(
        model_name="m",
        inputs=[],
        requested_output_names=[],
        correlation_id="abc",
        parameters={"k": 1},
    )
    assert q.correlation_id() == "abc"
    assert q.parameters() == '{"k": 1}'


def test_request_missing_required_arguments():
    with pytest.raises(TypeError, match="inputs, requested_output_names"):
        InferenceRequest(model_name="m")


def test_request_bad_correlation_id():
    with pytest.raises(TritonModelException, match="Correlation ID must be integer or string"):
        InferenceRequest(model_name="m", inputs=[], requested_output_names=[], correlation_id=1.5)


def test_request_bad_parameters():
    with pytest.raises(TritonModelException, match="Expect parameters values"):
        InferenceRequest(
            model_name="m", inputs=[], requested_output_names=[], parameters={"k": 1.5}
        )


def test_request_set_flags():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    q.set_flags(pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END)
    assert q.flags() == 2


def test_bls_outside_a_worker_answers_with_an_error_response():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    response = q.exec()
    assert response.has_error()
    assert "no call channel to the server" in response.error().message()
    assert response.error().code() == pb_utils.TritonError.UNAVAILABLE


def test_async_exec_needs_a_running_event_loop():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    with pytest.raises(TritonModelException, match="running event loop"):
        q.async_exec()


def test_decoupled_bls_outside_a_worker_iterates_one_error_response():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    iterator = q.exec(decoupled=True)
    assert isinstance(iterator, pb_utils.ResponseIterator)
    (response,) = list(iterator)
    assert response.has_error()
    assert "no call channel to the server" in response.error().message()
    assert list(iterator) == []  # iterated once
    iterator.cancel()  # nothing left to cancel


def test_async_decoupled_bls_gives_the_iterator_which_async_for_iterates():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])

    async def run():  # noqa: ANN202
        iterator = await q.async_exec(decoupled=True)
        return type(iterator), [r async for r in iterator]

    kind, responses = asyncio.run(run())
    assert kind is pb_utils.ResponseIterator
    assert len(responses) == 1 and responses[0].has_error()


def test_model_name_and_output_names_may_be_bytes():
    q = InferenceRequest(model_name=b"m", inputs=[], requested_output_names=[b"Y"])
    assert q.model_name() == "m"
    assert q.requested_output_names() == {"Y"}


def test_response_sender_says_decoupled_not_supported_yet():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    with pytest.raises(TritonModelException, match="decoupled"):
        q.get_response_sender()


def test_release_flags():
    q = InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    q.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL)
    with pytest.raises(TritonModelException, match="rescheduling is not supported yet"):
        q.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)


# -- InferenceRequest built by the worker -----------------------------------------------


def test_request_from_server_accessors():
    cancelled = [False]
    inputs = [_t("IN0"), _t("IN1")]
    q = InferenceRequest._from_server(
        inputs=inputs,
        requested_output_names=["OUT"],
        model_name="m",
        model_version=1,
        request_id="rid-7",
        correlation_id=9,
        flags=1,
        timeout=5_000_000,
        parameters={"s": "v", "i": 3, "b": True},
        is_cancelled=lambda: cancelled[0],
    )
    assert q.inputs() is inputs
    assert q.request_id() == "rid-7"
    assert q.correlation_id() == 9
    assert q.flags() == 1
    assert q.timeout() == 5_000_000
    assert q.requested_output_names() == {"OUT"}
    # compact JSON, as Triton writes request parameters
    assert q.parameters() == '{"s":"v","i":3,"b":true}'
    assert json.loads(q.parameters()) == {"s": "v", "i": 3, "b": True}
    assert q.is_cancelled() is False
    cancelled[0] = True
    assert q.is_cancelled() is True
    assert pb_utils.get_input_tensor_by_name(q, "IN1") is inputs[1]
    assert pb_utils.get_input_tensor_by_name(q, "nope") is None


def test_request_from_server_parameter_forms():
    base = {"inputs": [], "requested_output_names": [], "model_name": "m"}
    assert InferenceRequest._from_server(**base).parameters() == "{}"
    assert InferenceRequest._from_server(**base, parameters={}).parameters() == "{}"
    assert InferenceRequest._from_server(**base, parameters='{"x":1}').parameters() == '{"x":1}'
    assert InferenceRequest._from_server(**base, parameters={"d": 0.5}).parameters() == '{"d":0.5}'
