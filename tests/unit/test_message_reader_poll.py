"""``MessageReader`` with polling: messages arrive whole and in order whether they come
while it polls or after it sleeps; it polls only after a short wait, for at most its budget,
and a peer that closes ends the wait in either phase. With a spare budget it polls longer
while its polls find the core to themselves, and goes back to the short poll while they
keep finding another busy process on it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from tritium.ipc import MessageReader, encode
from tritium.ipc.messages import Unmap, decode_to_worker


def _thread_cpu() -> float:
    return time.thread_time()


def test_back_to_back_messages_arrive_in_order_while_polling():
    a, b = socket.socketpair()
    reader = MessageReader(a, decode_to_worker, poll_ns=50_000_000)
    try:
        for i in range(200):
            b.sendall(encode(Unmap(i)))
            assert reader.next() == Unmap(i)
        # A message sent a little later (within the budget) is picked up by polling.
        timer = threading.Timer(0.005, lambda: b.sendall(encode(Unmap(-1))))
        timer.start()
        assert reader.next() == Unmap(-1)
        timer.join()
    finally:
        a.close()
        b.close()


def test_after_a_long_wait_it_sleeps_instead_of_polling():
    a, b = socket.socketpair()
    reader = MessageReader(a, decode_to_worker, poll_ns=200_000_000)  # 200 ms budget
    try:
        # First wait: nothing known yet, so it blocks; the message comes after 300 ms, longer
        # than the budget, so the next wait must not poll either.
        threading.Timer(0.3, lambda: b.sendall(encode(Unmap(1)))).start()
        assert reader.next() == Unmap(1)
        threading.Timer(0.3, lambda: b.sendall(encode(Unmap(2)))).start()
        cpu = _thread_cpu()
        assert reader.next() == Unmap(2)
        assert _thread_cpu() - cpu < 0.05, "polled although the last wait was long"
    finally:
        a.close()
        b.close()


def test_after_a_short_wait_it_polls_at_most_its_budget_then_sleeps():
    a, b = socket.socketpair()
    reader = MessageReader(a, decode_to_worker, poll_ns=100_000_000)  # 100 ms budget
    try:
        b.sendall(encode(Unmap(1)))
        assert reader.next() == Unmap(1)  # a short wait: the next one polls
        threading.Timer(0.6, lambda: b.sendall(encode(Unmap(2)))).start()
        started = time.monotonic()
        cpu = _thread_cpu()
        assert reader.next() == Unmap(2)
        assert time.monotonic() - started >= 0.55
        # Polling burns (at most) the 100 ms budget, then the reader sleeps for the rest.
        assert _thread_cpu() - cpu < 0.3
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("delay", [0.005, 0.3])
def test_a_closed_peer_ends_the_wait_whether_polling_or_sleeping(delay):
    a, b = socket.socketpair()
    reader = MessageReader(a, decode_to_worker, poll_ns=50_000_000)
    try:
        b.sendall(encode(Unmap(1)))
        assert reader.next() == Unmap(1)
        threading.Timer(delay, b.close).start()
        with pytest.raises(EOFError):
            reader.next()
    finally:
        a.close()


def test_a_hinted_wait_polls_unless_the_last_one_outlasted_the_hint():
    a, b = socket.socketpair()
    reader = MessageReader(a, decode_to_worker, poll_ns=0)
    try:
        b.sendall(encode(Unmap(1)))
        assert reader.next(100_000_000) == Unmap(1)  # a short wait
        # Hinted: polls (burns CPU) for up to 100 ms, then sleeps until the message at 300 ms.
        threading.Timer(0.3, lambda: b.sendall(encode(Unmap(2)))).start()
        cpu = _thread_cpu()
        assert reader.next(100_000_000) == Unmap(2)
        polled = _thread_cpu() - cpu
        # That wait outlasted the hint: the next hinted wait sleeps at once.
        threading.Timer(0.3, lambda: b.sendall(encode(Unmap(3)))).start()
        cpu = _thread_cpu()
        assert reader.next(100_000_000) == Unmap(3)
        assert _thread_cpu() - cpu < 0.03
        assert polled > _thread_cpu() - cpu
    finally:
        a.close()
        b.close()


def _send_every(sock: socket.socket, count: int, gap: float) -> threading.Thread:
    def send() -> None:
        for i in range(count):
            time.sleep(gap)
            sock.sendall(encode(Unmap(i)))

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _read(reader: MessageReader, count: int) -> None:
    for i in range(count):
        assert reader.next() == Unmap(i)


def test_the_spare_poll_follows_the_share_of_polls_that_found_the_core_busy():
    a, b = socket.socketpair()
    short, spare = 1_000_000, 10_000_000
    reader = MessageReader(a, decode_to_worker, poll_ns=short, spare_poll_ns=spare)
    try:
        assert reader._budget_ns == short  # until polls have shown the core has time
        for _ in range(20):
            reader._note_share(cpu_ns=400_000, wall_ns=410_000)
        assert reader._budget_ns == spare
        # One poll that yielded the core now and then does not shorten it...
        reader._note_share(cpu_ns=100_000, wall_ns=400_000)
        assert reader._budget_ns == spare
        # ...polls that keep finding it shared do.
        for _ in range(6):
            reader._note_share(cpu_ns=100_000, wall_ns=400_000)
        assert reader._budget_ns == short
        # Polls too short to tell change nothing.
        for _ in range(50):
            reader._note_share(cpu_ns=10_000, wall_ns=10_000)
        assert reader._budget_ns == short
    finally:
        a.close()
        b.close()


@pytest.mark.serial
def test_polls_sharing_their_core_with_a_busy_process_stay_short_and_lengthen_without_it():
    cpu = min(os.sched_getaffinity(0))
    mask = os.sched_getaffinity(0)
    a, b = socket.socketpair()
    short, spare = 3_000_000, 30_000_000
    reader = MessageReader(a, decode_to_worker, poll_ns=short, spare_poll_ns=spare)
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass",
        ]
    )
    os.sched_setaffinity(0, {cpu})  # this thread, and the sender thread it starts
    try:
        time.sleep(0.2)  # the busy process is spinning on the same core
        b.sendall(encode(Unmap(-1)))
        assert reader.next() == Unmap(-1)  # a short wait: the next ones poll
        sender = _send_every(b, 60, 0.001)
        _read(reader, 60)
        sender.join(timeout=30)
        assert reader._shared > 0.5
        assert reader._budget_ns == short
        busy.kill()
        busy.wait(timeout=10)
        sender = _send_every(b, 80, 0.001)
        _read(reader, 80)
        sender.join(timeout=30)
        assert reader._shared < 0.25
        assert reader._budget_ns == spare
    finally:
        os.sched_setaffinity(0, mask)
        busy.kill()
        busy.wait(timeout=10)
        a.close()
        b.close()
