"""L3: instance worker processes — spawn, drive, stop."""

from tritium.workers.instance import (
    CrashPolicy,
    InstanceSpec,
    ModelInstance,
    RestartPolicy,
    RestartWait,
)
from tritium.workers.process import WorkerDied, WorkerProcess
from tritium.workers.restart_backoff import BackoffPolicy, RestartBackoff

__all__ = [
    "BackoffPolicy",
    "CrashPolicy",
    "InstanceSpec",
    "ModelInstance",
    "RestartBackoff",
    "RestartPolicy",
    "RestartWait",
    "WorkerDied",
    "WorkerProcess",
]
