"""Health poller of the chaos tool, run as its own process so the tool's threads (and their
GIL) cannot delay a probe: ``GET /v2/health/live`` every few milliseconds over one
keep-alive connection until stdin closes, then one JSON summary line on stdout.

A *stall* is the time from the first probe sent after an answer until the next answer
(failed probes and reconnects included): the longest stall is how long the server stopped
answering. On a machine with more runnable processes than cores a stall also contains
time the server's event-loop thread (or this poller) was ready to run but waited for a
core; the kernel counts it (``/proc/<tid>/schedstat``, run-queue wait), and the larger of
the two waits is subtracted to give the stall the server itself caused. Both are reported.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time


def _run_wait_s(path: str) -> float:
    """Seconds this thread has waited on a run queue (0 where schedstat is not kept)."""
    try:
        with open(path) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def poll(
    host: str, port: int, interval_s: float, stop: threading.Event, server_pid: int = 0
) -> dict[str, object]:
    server_stat = f"/proc/{server_pid}/task/{server_pid}/schedstat"  # the event-loop thread
    own_stat = "/proc/thread-self/schedstat"
    own: list[float] = []
    waits = (0.0, 0.0)
    conn: http.client.HTTPConnection | None = None
    stalls: list[float] = []
    failures = 0
    probes = 0
    worst_at = 0.0
    slow: list[tuple[float, float]] = []  # (when, ms) of every stall over 50 ms
    begin = time.monotonic()
    first_unanswered: float | None = None
    while not stop.is_set():
        sent = time.monotonic()
        if first_unanswered is None:
            first_unanswered = sent
            waits = (_run_wait_s(server_stat), _run_wait_s(own_stat))
        probes += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("GET", "/v2/health/live")
            reply = conn.getresponse()
            reply.read()
            ok = reply.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            if conn is not None:
                conn.close()
            conn = None
        now = time.monotonic()
        if ok:
            stall = now - first_unanswered
            waited = max(_run_wait_s(server_stat) - waits[0], _run_wait_s(own_stat) - waits[1], 0.0)
            own.append(max(stall - waited, 0.0))
            if not stalls or stall > max(stalls):
                worst_at = first_unanswered - begin
            if stall > 0.05:
                slow.append((round(first_unanswered - begin, 2), round(1000 * stall, 1)))
            stalls.append(stall)
            first_unanswered = None
        else:
            failures += 1
        time.sleep(interval_s)
    stalls.sort()
    own.sort()
    return {
        "max_own_stall_ms": round(1000 * own[-1], 1) if own else None,
        "probes": probes,
        "failures": failures,
        "answered": len(stalls),
        "max_stall_ms": round(1000 * stalls[-1], 1) if stalls else None,
        "max_stall_at_s": round(worst_at, 1),
        "p99_ms": round(1000 * stalls[int(0.99 * (len(stalls) - 1))], 1) if stalls else None,
        "median_ms": round(1000 * stalls[len(stalls) // 2], 2) if stalls else None,
        "over_100ms": sum(1 for s in stalls if s > 0.1),
        "over_50ms_at": slow[:50],
    }


def main() -> None:
    host, port, interval_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    server_pid = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    try:
        # Ahead of the load generators for the CPU (where allowed), so a stall measured
        # is the server's and not this process waiting for a core.
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass
    stop = threading.Event()
    result: dict[str, object] = {}

    def run() -> None:
        result.update(poll(host, port, interval_ms / 1000, stop, server_pid))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    sys.stdin.read()  # until the tool closes our stdin
    stop.set()
    thread.join(10)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
