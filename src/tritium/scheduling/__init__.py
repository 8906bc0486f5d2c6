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
from tritium.scheduling.rate_limiter import LimitedRunner, RateLimiter, RateLimiterStatistics
from tritium.scheduling.runner import BatchOutcome, Runner
from tritium.scheduling.sequence import SequenceBatcher, SequenceBatcherStatistics
from tritium.scheduling.sequence_config import SequenceConfig
from tritium.scheduling.sequence_policy import SequenceDecision, SequencePolicy
from tritium.scheduling.sequence_tensors import SequenceTensors, load_initial_states

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
    "LimitedRunner",
    "QueuePolicy",
    "QueuedRequest",
    "RateLimiter",
    "RateLimiterStatistics",
    "Runner",
    "SchedulerStatistics",
    "SequenceBatcher",
    "SequenceBatcherStatistics",
    "SequenceConfig",
    "SequenceDecision",
    "SequencePolicy",
    "SequenceTensors",
    "TimeoutAction",
    "load_initial_states",
]
