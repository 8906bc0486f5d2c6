"""Routing: Triton's 404/405 split, digit-only versions, decoded model names."""

from __future__ import annotations

import pytest

from tritium.frontends.http.router import Router


def h1(req, params):
    return "h1"


def h2(req, params):
    return "h2"


def h3(req, params):
    return "h3"


@pytest.fixture
def router() -> Router:
    r = Router()
    r.add("GET", "/v2", h1)
    r.add("GET", "/v2/models/{model}", h1)
    r.add("GET", "/v2/models/{model}/versions/{version:int}", h2)
    r.add("POST", "/v2/models/{model}/infer", h3)
    return r


def test_literal_and_parameters(router):
    m = router.match("GET", "/v2")
    assert m.handler is h1 and m.params == {}
    m = router.match("GET", "/v2/models/simple")
    assert m.handler is h1 and m.params == {"model": "simple"}
    m = router.match("GET", "/v2/models/simple/versions/12")
    assert m.handler is h2 and m.params == {"model": "simple", "version": "12"}


def test_model_names_are_percent_decoded(router):
    # tritonclient quotes model names in URLs
    m = router.match("POST", "/v2/models/my%20model%2Fx/infer")
    assert m.params == {"model": "my model/x"}


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/simple/versions/abc",  # Triton's version pattern is [0-9]+
        "/v2/models/simple/versions/-1",
        "/v2/models//infer",
        "/v2/models/simple/",
        "/v2/",
        "/",
        "",
        "/v2/nothing",
    ],
)
def test_unknown_paths_are_404(router, path):
    m = router.match("GET", path)
    assert m.handler is None and m.status == 404


def test_known_path_with_another_method_is_405(router):
    m = router.match("GET", "/v2/models/simple/infer")
    assert m.handler is None and m.status == 405
    assert router.match("HEAD", "/v2").status == 405


def test_literal_segment_beats_parameter_whatever_the_order():
    r = Router()
    r.add("GET", "/v2/models/{model}", h1)
    r.add("GET", "/v2/models/stats", h2)
    assert r.match("GET", "/v2/models/stats").handler is h2
    assert r.match("GET", "/v2/models/other").handler is h1


def test_routes_added_later_are_seen_despite_the_cache(router):
    assert router.match("GET", "/v2/repository/index").status == 404
    router.add("GET", "/v2/repository/index", h3)
    assert router.match("GET", "/v2/repository/index").handler is h3


def test_bad_patterns_are_refused():
    r = Router()
    with pytest.raises(ValueError):
        r.add("GET", "v2", h1)
    with pytest.raises(ValueError):
        r.add("GET", "/v2/{x:float}", h1)
