"""Decide whether a completed model configuration can be served, with Triton's messages.

Run on the output of ``complete_config``. Each check raises ConfigError with the text
Triton uses for the same problem and the phase in which Triton reports it (see
ConfigError). Where Triton has no check, the message follows the same style.
"""

from __future__ import annotations

from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup, ModelQueuePolicy

from tritium.config.backends import ENSEMBLE_PLATFORM, KNOWN_BACKEND_PLATFORMS, SUPPORTED_BACKENDS
from tritium.config.errors import ConfigError
from tritium.config.instance_devices import device_problem
from tritium.config.sequence_checks import sequence_problem
from tritium.config.tensor_checks import tensor_problem

# Triton prints its default --min-compute-capability with std::to_string.
_MIN_COMPUTE_CAPABILITY = "6.000000"


def validate_config(config: ModelConfig, model_name: str, *, gpu_count: int = 0) -> None:
    """Raise ConfigError for the first problem in ``config``; ``model_name`` is its folder."""
    problem = _repository_problem(config, model_name)
    if problem is not None:
        raise ConfigError(problem, phase="repository")
    problem = _load_problem(config, gpu_count)
    if problem is not None:
        raise ConfigError(problem, phase="load")


def _repository_problem(config: ModelConfig, model_name: str) -> str | None:
    """Triton's repository poll: the name check, then ValidateModelConfig."""
    name = config.name
    if not name:
        return "model configuration must specify 'name'"
    if name != model_name:
        return (
            f"unexpected directory name '{model_name}' for model '{name}', "
            "directory name must equal model name"
        )
    if not config.backend:
        if config.platform != ENSEMBLE_PLATFORM:
            return f"unexpected platform type '{config.platform}' for {name}"
    elif config.platform == ENSEMBLE_PLATFORM:
        return (
            f"Ensemble model '{name}' must have platform type '{config.platform}' "
            "and empty backend type"
        )
    platforms = KNOWN_BACKEND_PLATFORMS.get(config.backend)
    if platforms is not None and config.platform not in platforms:
        return f"unexpected 'platform' and 'backend' pair, got:{config.platform}, {config.backend}"
    if config.max_batch_size < 0:
        return f"'max_batch_size' must be non-negative value for {name}"
    if not config.HasField("version_policy"):
        return f"must specify 'version policy' for {name}"
    return (
        _dynamic_batching_problem(config)
        or sequence_problem(config)
        or _ensemble_problem(config)
        or _response_cache_problem(config)
        or _metrics_problem(config)
    )


def _dynamic_batching_problem(config: ModelConfig) -> str | None:
    if not config.HasField("dynamic_batching"):
        return None
    name = config.name
    batcher = config.dynamic_batching
    for size in batcher.preferred_batch_size:
        if size <= 0:
            return f"dynamic batching preferred size must be positive for {name}"
        if size > config.max_batch_size:
            return f"dynamic batching preferred size must be <= max batch size for {name}"
    levels = batcher.priority_levels
    if levels != 0:
        if batcher.default_priority_level == 0 or batcher.default_priority_level > levels:
            return f"default priority level must be in range [1, {levels}] for {name}"
        for level in batcher.priority_queue_policy:
            if level == 0 or level > levels:
                return (
                    f"priority queue policy must have priority level in range [1, {levels}] "
                    f"for {name}"
                )
    if batcher.preserve_ordering:
        if levels > 1:
            return f"Only one priority level is allowed when 'preserve_ordering' is true for {name}"
        policies = [batcher.default_queue_policy, *batcher.priority_queue_policy.values()]
        for policy in policies:
            if (
                policy.default_timeout_microseconds != 0
                and policy.timeout_action == ModelQueuePolicy.DELAY
            ):
                return (
                    "Queue policy can not have DELAY as timeout action when 'preserve_ordering' "
                    f"is true for {name}"
                )
    return None


def _ensemble_problem(config: ModelConfig) -> str | None:
    name = config.name
    if not config.HasField("ensemble_scheduling"):
        if config.platform == ENSEMBLE_PLATFORM:
            return (
                f"ensemble scheduling must be set for ensemble {name} whose platform is "
                f"{ENSEMBLE_PLATFORM}"
            )
        return None
    # The data-flow checks between steps belong to the ensemble scheduler, which needs
    # the other models' configurations anyway.
    if config.platform != ENSEMBLE_PLATFORM:
        return (
            f"ensemble scheduling cannot be set for model '{name}' whose platform is not "
            f"{ENSEMBLE_PLATFORM}"
        )
    if config.instance_group:
        return f"instance group should not be specified for ensemble '{name}'"
    if config.HasField("optimization"):
        return f"optimization should not be specified for ensemble '{name}'"
    if config.model_warmup:
        return f"model_warmup can not be specified for ensemble '{name}'"
    if not config.ensemble_scheduling.step:
        return f"must specify 'step' for ensemble '{name}'"
    return None


def _response_cache_problem(config: ModelConfig) -> str | None:
    if config.model_transaction_policy.decoupled and config.response_cache.enable:
        return (
            f"Response Cache does not currently support model {config.name} with 'decoupled' "
            "transaction policy. Please disable the response cache."
        )
    return None


def _metrics_problem(config: ModelConfig) -> str | None:
    if not config.HasField("model_metrics"):
        return None
    for control in config.model_metrics.metric_control:
        if not control.HasField("metric_identifier"):
            return "metric control must specify 'metric_identifier'"
        if not control.metric_identifier.family:
            return "metric identifier must specify non-empty 'family'"
        if not control.HasField("histogram_options"):
            return "metric control must specify 'histogram_options'"
        if not control.histogram_options.buckets:
            return "histogram options must specify non-empty 'buckets'"
    return None


def _load_problem(config: ModelConfig, gpu_count: int) -> str | None:
    """What Triton finds while loading a version: backend, tensors, instance groups."""
    if config.platform != ENSEMBLE_PLATFORM and config.backend not in SUPPORTED_BACKENDS:
        # Triton's text for a backend it has no library for, which is exactly the case.
        return (
            f"unable to find backend library for backend '{config.backend}', "
            "try specifying runtime on the model configuration."
        )
    problem = tensor_problem(config)
    if problem is not None:
        return f"{problem} for {config.name}"
    problem = _instance_group_problem(config, gpu_count)
    if problem is not None:
        return problem
    params = {key: value.string_value for key, value in config.parameters.items()}
    gpu_groups = any(g.kind == ModelInstanceGroup.KIND_GPU for g in config.instance_group)
    return device_problem(config.name, params, gpu_groups)


def _instance_group_problem(config: ModelConfig, gpu_count: int) -> str | None:
    if config.HasField("ensemble_scheduling"):
        return None
    name = config.name
    if not config.instance_group:
        return f"must specify one or more 'instance group's for {name}"
    available = range(max(gpu_count, 0))
    for group in config.instance_group:
        prefix = f"instance group {group.name} of model {name}"
        if group.kind == ModelInstanceGroup.KIND_MODEL:
            if group.gpus:
                return f"{prefix} has kind KIND_MODEL but specifies one or more GPUs"
        elif group.kind == ModelInstanceGroup.KIND_GPU:
            if not group.gpus:
                if not available:
                    return f"{prefix} has kind KIND_GPU but no GPUs are available"
                return f"{prefix} has kind KIND_GPU but specifies no GPUs"
            for gpu in group.gpus:
                if gpu not in available:
                    listed = ", ".join(str(g) for g in available)
                    return (
                        f"{prefix} specifies invalid or unsupported gpu id {gpu}. GPUs with at "
                        "least the minimum required CUDA compute compatibility of "
                        f"{_MIN_COMPUTE_CAPABILITY} are: {listed}"
                    )
        elif group.kind == ModelInstanceGroup.KIND_CPU:
            if group.gpus:
                return f"{prefix} has kind KIND_CPU but specifies one or more GPUs"
        else:
            return f"{prefix} has unexpected kind KIND_AUTO"
        if config.platform != "tensorrt_plan" and group.profile:
            return (
                f"{prefix} and platform {config.platform} specifies profile field which is "
                "only supported for TensorRT models"
            )
        if group.count < 1:
            return f"{prefix} must have 'count' of at least 1"
    return None
