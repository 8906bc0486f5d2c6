"""L3: instance worker processes — spawn, drive, stop."""

from tritium.workers.instance import CrashPolicy, InstanceSpec, ModelInstance
from tritium.workers.process import WorkerDied, WorkerProcess

__all__ = ["CrashPolicy", "InstanceSpec", "ModelInstance", "WorkerDied", "WorkerProcess"]
