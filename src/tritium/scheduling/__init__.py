"""L3: schedulers that turn requests into batches for instances."""

from tritium.scheduling.batch_config import BatchingConfig, QueuePolicy, TimeoutAction
from tritium.scheduling.batch_policy import (
    BatchDecision,
    BatchPolicy,
    BatchPolicyStatistics,
    QueuedRequest,
)
from tritium.scheduling.default import DefaultScheduler, SchedulerStatistics
from tritium.scheduling.dynamic import BatchCodec, DynamicBatcher, DynamicBatcherStatistics
from tritium.scheduling.runner import BatchOutcome, Runner

__all__ = [
    "BatchCodec",
    "BatchOutcome",
    "BatchDecision",
    "BatchPolicy",
    "BatchPolicyStatistics",
    "BatchingConfig",
    "DefaultScheduler",
    "DynamicBatcher",
    "DynamicBatcherStatistics",
    "QueuePolicy",
    "QueuedRequest",
    "Runner",
    "SchedulerStatistics",
    "TimeoutAction",
]
