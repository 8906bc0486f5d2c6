"""BLS to decoupled models (``exec(decoupled=True)`` / ``async_exec(decoupled=True)``)
through a real server, as Triton's Python backend behaves.

``bls_stream`` (tests/pipeline_models) calls a model and reports what the iterator gave;
the targets are ``decoupled_words`` and ``decoupled_async`` (tests/models, decoupled) and
``ens_slow_inc`` (not decoupled).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritium.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("bls_stream", "decoupled_words", "decoupled_async", "ens_slow_inc")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    args = ["--model-control-mode=explicit", *(f"--load-model={m}" for m in MODELS)]
    repos = [ROOT / "tests" / "pipeline_models", ROOT / "tests" / "models"]
    with ServerProcess(repos, args, grpc=True) as proc:
        yield proc


def _stream(server: ServerProcess, count: int, protocol: str = "http", **params) -> dict:
    """Ask bls_stream to call its target with COUNT = ``count``; its report."""
    module = httpclient if protocol == "http" else grpcclient
    if protocol == "http":
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    else:
        client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        inp = module.InferInput("COUNT", [1], "INT32")
        inp.set_data_from_numpy(np.array([count], np.int32))
        result = client.infer("bls_stream", [inp], parameters=params or None)
        return json.loads(result.as_numpy("INFO")[0])
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_exec_decoupled_iterates_every_response_then_an_empty_final_one(server, protocol):
    # The target sends 4 responses, then the final flag alone: Triton's iterator yields
    # the 4 and, last, an empty response.
    info = _stream(server, 4, protocol)
    assert info["indexes"] == [0, 1, 2, 3]
    assert info["words"] == ["w0", "w1", "w2", "w3"]
    assert (info["errors"], info["empty"]) == ([], 1)


def test_a_final_response_with_data_is_the_last_one(server):
    info = _stream(server, 3, mode="final_with_data")
    assert info["indexes"] == [0, 1, 2] and info["empty"] == 0


def test_zero_responses_give_only_the_empty_final_one(server):
    info = _stream(server, 0)
    assert (info["indexes"], info["errors"], info["empty"]) == ([], [], 1)


def test_responses_sent_after_execute_returned_arrive_too(server):
    info = _stream(server, 3, mode="thread")
    assert info["indexes"] == [0, 1, 2] and info["empty"] == 1


def test_async_exec_decoupled_from_async_execute(server):
    # await async_exec(decoupled=True) gives Triton's ResponseIterator; two side by side.
    info = _stream(server, 5, how="async", target="decoupled_async")
    assert info["type"] == "ResponseIterator"
    assert info["indexes"] == [0, 1, 2, 3, 4] * 2 and info["empty"] == 2


def test_async_for_over_the_iterator(server):
    info = _stream(server, 5, how="aiter", target="decoupled_async")
    assert info["indexes"] == [0, 1, 2, 3, 4] and info["empty"] == 1


def test_an_error_mid_stream_is_an_error_response_and_the_stream_goes_on(server):
    info = _stream(server, 0, mode="error_mid")
    assert info["indexes"] == [0, 1]
    assert info["errors"] == ["bad word"]
    assert info["empty"] == 1


def test_a_target_that_raises_ends_the_stream_with_its_error(server):
    info = _stream(server, 3, mode="raise")
    assert info["indexes"] == [] and len(info["errors"]) == 1
    assert "asked to fail" in info["errors"][0]


def test_a_timeout_ends_the_stream_with_an_error_and_cancels_the_target(server):
    # 50 ms per response, 300 ms allowed: a few responses, then Triton's timeout error,
    # and the target sees is_cancelled().
    info = _stream(server, 100, mode="slow", timeout_us=300_000, note=1)
    assert 1 <= len(info["indexes"]) < 20, info
    assert info["errors"] == ["Request timeout expired"]
    assert info["note"].startswith("cancelled after"), info
    assert info["elapsed"] < 5


def test_dropping_the_iterator_cancels_the_target(server):
    info = _stream(server, 100, mode="slow", how="drop", take=2)
    assert info["indexes"] == [0, 1]
    assert info["note"].startswith("cancelled after"), info


def test_iterator_cancel_ends_the_stream_with_a_cancelled_error(server):
    info = _stream(server, 100, mode="slow", how="cancel", take=2)
    assert info["indexes"][:2] == [0, 1] and len(info["indexes"]) < 20
    assert info["errors"] == ["BLS request was cancelled"]
    assert info["note"].startswith("cancelled after"), info


def test_decoupled_true_on_a_model_that_is_not_gives_its_one_response(server):
    # As in Triton: the iterator yields the model's one response, and that is the last.
    info = _stream(server, 2, target="ens_slow_inc")
    assert info["ys"] == [[[3.0]]]  # Y = X + 1
    assert (info["errors"], info["empty"]) == ([], 0)
    # A failing one gives its one error response.
    info = _stream(server, -1, target="ens_slow_inc")
    assert info["ys"] == [] and len(info["errors"]) == 1 and info["empty"] == 0


def test_decoupled_false_on_a_decoupled_model_is_triton_error(server):
    info = _stream(server, 2, how="plain")
    assert info["errors"] == [
        "Model decoupled_words - Error when running inference: Model decoupled_words is "
        "using the decoupled. The current BLS request call doesn't support models using "
        "the decoupled transaction policy. Please use 'decoupled=True' argument to the "
        "'exec' or 'async_exec' calls for decoupled models.'"
    ]


def test_a_caller_that_stops_reading_is_cut_off_at_the_bound(server):
    # 3000 responses at once while the caller sleeps: the server holds at most 1024
    # untaken for it, then cancels the call with an error the caller reads last.
    info = _stream(server, 3000, how="stall", stall_s=1.0)
    assert len(info["indexes"]) <= 1025
    assert info["errors"] == [
        "BLS request cancelled: the caller left more than 1024 responses unread"
    ]
    # The server is fine afterwards: the next stream is whole.
    info = _stream(server, 5)
    assert info["indexes"] == [0, 1, 2, 3, 4] and info["empty"] == 1


def test_a_target_whose_worker_dies_mid_stream_ends_it_with_an_error(server):
    # Last in this module: decoupled_words restarts afterwards.
    info = _stream(server, 3, mode="die")
    assert info["indexes"] == [0]
    assert len(info["errors"]) == 1 and info["empty"] == 0, info
