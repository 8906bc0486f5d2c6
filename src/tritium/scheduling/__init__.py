"""L3: schedulers that turn requests into batches for instances."""

from tritium.scheduling.default import DefaultScheduler, SchedulerStatistics
from tritium.scheduling.runner import Runner

__all__ = ["DefaultScheduler", "Runner", "SchedulerStatistics"]
