"""WriteBurst: writes queued while a batch is handed out, made in order at its end."""

from __future__ import annotations

import logging

import pytest

from tritium.core.write_burst import WriteBurst


def test_writes_go_at_once_when_nothing_is_held():
    burst, out = WriteBurst(), []
    burst.write(out.append, b"a")
    assert out == [b"a"]


def test_held_writes_wait_for_the_end_and_keep_their_order():
    burst, first, second = WriteBurst(), [], []
    with burst.held():
        burst.write(first.append, b"1")
        burst.write(second.append, b"2")
        burst.write(first.append, b"3")
        assert first == [] and second == []
    assert first == [b"1", b"3"] and second == [b"2"]


def test_nested_holds_write_once_the_outermost_ends():
    burst, out = WriteBurst(), []
    with burst.held():
        with burst.held():
            burst.write(out.append, b"inner")
        assert out == []
        burst.write(out.append, b"outer")
    assert out == [b"inner", b"outer"]


def test_flush_writes_what_is_queued_before_a_direct_write():
    burst, out = WriteBurst(), []
    with burst.held():
        burst.write(out.append, b"queued")
        burst.flush()
        out.append(b"direct")
        burst.write(out.append, b"later")
    assert out == [b"queued", b"direct", b"later"]


def test_an_exception_while_held_still_writes_and_releases(caplog):
    burst, out = WriteBurst(), []
    with pytest.raises(RuntimeError), burst.held():
        burst.write(out.append, b"a")
        raise RuntimeError("handing out failed")
    assert out == [b"a"]
    burst.write(out.append, b"b")  # no longer held
    assert out == [b"a", b"b"]


def test_a_failing_write_does_not_stop_the_others(caplog):
    burst, out = WriteBurst(), []

    def broken(data: bytes) -> None:
        raise ConnectionResetError("gone")

    with caplog.at_level(logging.ERROR, "tritium.core.write_burst"), burst.held():
        burst.write(out.append, b"1")
        burst.write(broken, b"x")
        burst.write(out.append, b"2")
    assert out == [b"1", b"2"]
    assert "writing an answer failed" in caplog.text
