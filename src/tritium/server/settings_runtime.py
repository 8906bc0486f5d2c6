"""The options of the server process itself: identity, shutdown, busy polling, logging."""

from __future__ import annotations

from dataclasses import dataclass

from tritium.server import settings_checks as checks
from tritium.server.settings_field import opt


@dataclass(frozen=True)
class RuntimeSettings:
    """Server and logging options (part of ``Settings``)."""

    # --- Server -------------------------------------------------------------------------
    id: str = opt("triton", "Identifier of this server, reported by server metadata.", "Server")
    exit_timeout_secs: int = opt(
        30,
        "Seconds to wait at shutdown for in-flight inferences to finish; after that the "
        "server exits even if some are still running.",
        "Server",
    )
    drain_delay_secs: int = opt(
        0,
        "Seconds to keep serving after SIGTERM while answering not-ready (so that load "
        "balancers stop sending first), before new connections are refused. 0: at once.",
        "Server",
    )

    busy_poll_us: int = opt(
        1000,
        "While exactly one inference request is in flight, the event loop keeps polling its "
        "sockets instead of sleeping, for up to this many microseconds per request, and the "
        "model instances that served it poll as long for their next batch, so answers and "
        "the next request are picked up without a wake-up (lower latency for a lone client, "
        "at the price of that CPU time). With several requests in flight the loop polls as "
        "long after each accepted, and the instances as long after each batch, while trials "
        "find that polling answers more requests per second. 0 turns polling off.",
        "Server",
    )
    busy_poll_linger_us: int = opt(
        150,
        "After the last in-flight request is answered, the event loop keeps polling this "
        "many microseconds for the client's next request before it sleeps (0: sleep at "
        "once). An idle server does not poll.",
        "Server",
    )

    busy_poll_worker_us: int = opt(
        300,
        "A model instance's process polls for its next batch up to this many microseconds "
        "before it sleeps, when its last wait was shorter than that (batches coming back "
        "to back, or a lone client's next request); one whose batches come further apart "
        "sleeps at once, as does an idle one. 0 turns polling off.",
        "Server",
    )
    busy_poll_worker_spare_us: int = opt(
        1000,
        "A model instance's process polls up to this many microseconds instead of "
        "--busy-poll-worker-us while its polls find its core to themselves (the machine has "
        "time to spare, as when the model's own compute keeps batches apart); as soon as "
        "its polls keep finding other busy processes waiting for the core it returns to the "
        "shorter poll. 0 (or no more than --busy-poll-worker-us): always the shorter poll.",
        "Server",
    )

    # --- Logging ------------------------------------------------------------------------
    log_verbose: int = opt(
        0,
        "Verbose logging level. 0 disables verbose logging, values >= 1 enable it "
        "(true/false are read as 1/0).",
        "Logging",
        kind="level",
    )
    log_info: bool = opt(True, "Enable info-level logging.", "Logging")
    log_warning: bool = opt(True, "Enable warning-level logging.", "Logging")
    log_error: bool = opt(True, "Enable error-level logging.", "Logging")
    log_format: str = opt(
        "default",
        'Log line format: "default" (severity and "MMDD hh:mm:ss.ssssss" timestamp) or '
        '"ISO8601" ("YYYY-MM-DDThh:mm:ssZ" timestamp, then severity).',
        "Logging",
        choices=checks.LOG_FORMATS,
    )
    log_file: str = opt(
        "", "Write the log to this file instead of the console.", "Logging", metavar="<path>"
    )
