"""The chaos tool's ledger: every request sent, every answer received, and the verdict.

A request is opened with the unique TAG it carries, its deadline and what the tool expects
of it (an answer; possibly a deadline expiry; or nothing, because the client walks away).
Answers are reported as they arrive; the request is judged the moment its final answer
comes, then forgotten except for its id, so a second final answer (or a late one for a
request already closed) is still caught and a 30-minute soak keeps little in memory.

A request fails the run when it got no final answer, more than one, one later than its
deadline plus ``bound_s``, an answer carrying another request's TAG, an error without a
message, a dropped connection the client did not cause, or a client deadline that expired
on a request the server should have answered in time.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

#: What the tool expects of a request.
ANSWER = "answer"  # success or a clear error, before the deadline
DEADLINE = "deadline"  # sent with a deadline shorter than the work: may expire
ABANDON = "abandon"  # the client disconnects before the answer


@dataclass(slots=True)
class Request:
    id: int
    kind: str  # e.g. "http/unary", "grpc/stream"
    model: str
    tag: int
    deadline_s: float
    expect: str
    sent: float = field(default_factory=time.monotonic)
    responses: int = 0  # stream responses before the final one


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a request ended: ``ok``, ``error`` (with ``code`` and ``detail``), ``deadline``
    (the client's deadline expired), ``abandoned`` (the client left) or ``dropped`` (the
    connection broke with no answer)."""

    kind: str
    code: str = ""
    detail: str = ""


class Ledger:
    def __init__(self, bound_s: float = 2.0) -> None:
        self.bound_s = bound_s
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._open: dict[int, Request] = {}
        self._closed: set[int] = set()
        self.counts: Counter[tuple[str, str]] = Counter()  # (kind, outcome) -> n
        self.sent: Counter[str] = Counter()
        self.error_codes: Counter[tuple[str, str]] = Counter()  # (code, first words) -> n
        self.violations: list[str] = []
        self.notes: Counter[str] = Counter()
        self.ok_total = 0
        self.longest_s: dict[str, float] = {}

    # -- recording ------------------------------------------------------------------

    def open(self, kind: str, model: str, deadline_s: float, expect: str = ANSWER) -> Request:
        with self._lock:
            rid = next(self._ids)
            # The TAG is unique per request and not guessable from the id alone.
            request = Request(rid, kind, model, rid * 7919 + 13, deadline_s, expect)
            self._open[rid] = request
            self.sent[kind] += 1
        return request

    def response(self, request: Request, tag: int) -> None:
        """A non-final stream response arrived."""
        if tag != request.tag:
            self._violation(request, f"response carries TAG {tag}, expected {request.tag}")
        request.responses += 1

    def note(self, text: str) -> None:
        with self._lock:
            self.notes[text] += 1

    def final(self, request: Request, outcome: Outcome, tag: int | None = None) -> None:
        now = time.monotonic()
        with self._lock:
            if self._open.pop(request.id, None) is None:
                again = "a second final answer" if request.id in self._closed else "unknown id"
                self.violations.append(
                    f"{request.kind} {request.model} #{request.id}: {again} ({outcome.kind})"
                )
                return
            self._closed.add(request.id)
            self.counts[(request.kind, outcome.kind)] += 1
            if outcome.kind == "ok":
                self.ok_total += 1
            if outcome.kind == "error":
                words = " ".join(outcome.detail.split()[:6])
                self.error_codes[(outcome.code, words)] += 1
            took = now - request.sent
            if took > self.longest_s.get(request.kind, 0.0):
                self.longest_s[request.kind] = took
        problem = _judge(request, outcome, tag, took, self.bound_s)
        if problem:
            self._violation(request, problem)

    def _violation(self, request: Request, text: str) -> None:
        with self._lock:
            if len(self.violations) < 1000:
                self.violations.append(f"{request.kind} {request.model} #{request.id}: {text}")

    def violation_text(self, text: str) -> None:
        """A broken rule that belongs to no open request (an answer nobody waits for)."""
        with self._lock:
            if len(self.violations) < 1000:
                self.violations.append(text)

    def close_out(self) -> None:
        """End of run: every request still open never got its final answer."""
        with self._lock:
            left = list(self._open.values())
            self._open.clear()
        for request in left:
            if request.expect != ABANDON:
                self._violation(request, "no final answer")

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    # -- report ---------------------------------------------------------------------

    def table(self) -> list[dict[str, object]]:
        rows = []
        for kind in sorted(self.sent):
            row: dict[str, object] = {"kind": kind, "sent": self.sent[kind]}
            for outcome in ("ok", "error", "deadline", "abandoned", "dropped"):
                row[outcome] = self.counts[(kind, outcome)]
            row["longest_s"] = round(self.longest_s.get(kind, 0.0), 3)
            rows.append(row)
        return rows


def _judge(request: Request, outcome: Outcome, tag: int | None, took: float, bound: float) -> str:
    """Why this final answer breaks the rules ("" when it does not)."""
    if request.expect == ABANDON:
        return ""  # the client left: whatever it saw first is its end
    if took > request.deadline_s + bound:
        return f"final answer after {took:.2f} s (deadline {request.deadline_s:g} s + {bound:g} s)"
    if outcome.kind == "ok":
        if tag != request.tag:
            return f"answer carries TAG {tag}, expected {request.tag}"
        return ""
    if outcome.kind == "error":
        if not outcome.detail.strip():
            return f"error {outcome.code} without a message"
        if outcome.code in ("500", "StatusCode.INTERNAL", "StatusCode.UNKNOWN"):
            return f"internal error: {outcome.code} {outcome.detail[:200]}"
        return ""
    if outcome.kind == "deadline":
        if request.expect == DEADLINE:
            return ""
        return f"no answer within the {request.deadline_s:g} s deadline"
    if outcome.kind == "dropped":
        return f"connection dropped without an answer: {outcome.detail[:200]}"
    return f"unexpected outcome {outcome.kind}"
