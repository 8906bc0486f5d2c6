"""L3: instance worker processes — spawn, drive, stop."""

from tritium.workers.instance import InstanceSpec, ModelInstance
from tritium.workers.process import WorkerDied, WorkerProcess

__all__ = ["InstanceSpec", "ModelInstance", "WorkerDied", "WorkerProcess"]
