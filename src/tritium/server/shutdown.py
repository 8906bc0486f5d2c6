"""How the server stops: the signals (the first starts a graceful stop, a second one stops
at once), the pre-drain window of ``--drain-delay-secs``, and Triton's once-a-second
countdown in the log while in-flight requests finish.

The countdown's texts are Triton's (``server.cc``): ``Waiting for in-flight requests to
complete.``, then ``Timeout N: Found M model versions that have in-flight inferences``
each second until no model has one, ``All models are stopped, unloading models``, and
``Timeout N: Found M live models and K in-flight non-inference requests`` each second while
the models unload. N counts the seconds left of ``--exit-timeout-secs``. K is always 0 here:
tritium's non-inference requests end with the frontends, which have stopped by then.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

log = logging.getLogger("tritium.server")

#: The exit status of a stop cut short by a second signal: Triton's when its stop does not
#: finish gracefully ("failed to stop server" → exit 1).
FORCED_EXIT_STATUS = 1

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stoppable(Protocol):
    """The server as its stop sees it (``app.Server`` is one)."""

    models: Any  # the model manager: ``kill_all()`` is the last resort

    async def start(self) -> bool: ...
    def begin_drain(self) -> None: ...
    async def shutdown(self) -> None: ...
    async def abort(self) -> None: ...


async def serve_until_stopped(server: Stoppable, drain_delay_s: float) -> int:
    """Start ``server`` and serve until SIGINT/SIGTERM; then the drain window (when
    ``drain_delay_s`` > 0) and the graceful stop, cut short by a second signal. Returns the
    exit code: 0, 1 when start-up failed, :data:`FORCED_EXIT_STATUS` when cut short."""
    signals = StopSignals(asyncio.get_running_loop())
    signals.install()
    graceful = True
    ok = False
    try:
        ok = await server.start()
        if ok:
            await signals.first.wait()
            log.info("Received signal, shutting down")
            if drain_delay_s > 0:
                server.begin_drain()
                await drain_delay(drain_delay_s, signals.second)
    finally:
        try:
            graceful = await signals.unless_second(server.shutdown())
            if not graceful:
                await server.abort()
        finally:
            # Last resort when a graceful stop failed: no worker outlives the server.
            server.models.kill_all()
        signals.remove()
    if not graceful:
        return FORCED_EXIT_STATUS
    return 0 if ok else 1


class StopSignals:
    """SIGINT/SIGTERM on the running loop: ``first`` is set by the first one, ``second``
    by any later one (the operator insists: stop at once)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.first = asyncio.Event()
        self.second = asyncio.Event()

    def install(self) -> None:
        for sig in _SIGNALS:
            self._loop.add_signal_handler(sig, self._received, sig)

    def remove(self) -> None:
        for sig in _SIGNALS:
            self._loop.remove_signal_handler(sig)

    def _received(self, sig: int) -> None:
        if not self.first.is_set():
            self.first.set()
            return
        if not self.second.is_set():
            log.warning("Signal (%d) received again: stopping now", sig)
            self.second.set()

    async def unless_second(self, work: Awaitable[Any]) -> bool:
        """Run ``work`` to its end, unless a second signal comes first (then ``work`` is
        cancelled); True when it ran to its end."""
        task = asyncio.ensure_future(work)
        if not self.second.is_set():
            interrupt = asyncio.ensure_future(self.second.wait())
            try:
                await asyncio.wait({task, interrupt}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                interrupt.cancel()
        if task.done():
            task.result()  # surfaces a failure of ``work``
            return True
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - stopping at once regardless
            log.exception("error while stopping")
        return False


async def drain_delay(seconds: float, second_signal: asyncio.Event) -> None:
    """The pre-drain window: wait ``seconds`` (everything is still served, readiness says
    not-ready), or until a second signal."""
    log.info(
        "Draining: the server answers not-ready and keeps serving for %g s "
        "(--drain-delay-secs) before it stops accepting",
        seconds,
    )
    try:
        await asyncio.wait_for(second_signal.wait(), seconds)
    except asyncio.TimeoutError:
        pass


class Countdown:
    """Logs Triton's shutdown countdown once a second (see the module docstring) until
    :meth:`stop`; ``busy_versions()`` counts the model versions with requests in flight,
    ``live_models()`` the versions still loaded."""

    def __init__(
        self,
        left: Callable[[], float],
        busy_versions: Callable[[], int],
        live_models: Callable[[], int],
    ) -> None:
        self._left = left
        self._busy_versions = busy_versions
        self._live_models = live_models
        self._unloading = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        log.info("Waiting for in-flight requests to complete.")
        self._task = asyncio.get_running_loop().create_task(self._run())

    def unloading(self) -> None:
        """The frontends have stopped: from now on the models unload."""
        if not self._unloading:
            self._unloading = True
            log.info("All models are stopped, unloading models")
            self._line()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _line(self) -> None:
        seconds = max(math.ceil(self._left() - 1e-3), 0)
        if self._unloading:
            log.info(
                "Timeout %d: Found %d live models and 0 in-flight non-inference requests",
                seconds,
                self._live_models(),
            )
        else:
            log.info(
                "Timeout %d: Found %d model versions that have in-flight inferences",
                seconds,
                self._busy_versions(),
            )

    async def _run(self) -> None:
        while True:
            self._line()
            await asyncio.sleep(1.0)
