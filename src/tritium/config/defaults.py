"""Fill in a model configuration the way Triton does before it validates and loads it.

Triton completes a configuration in three steps, all reproduced here: backend fields
(name, backend, default model file), normalisation (version policy, batcher defaults,
pinned-memory flags) and instance groups. The result is what
``GET /v2/models/<model>/config`` shows.
"""

from __future__ import annotations

from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritium.config.backends import (
    BACKEND_FILENAMES,
    DEFAULT_PLATFORMS,
    FILENAME_BACKENDS,
    FILENAME_PLATFORMS,
    PLATFORM_BACKENDS,
    PYTHON_MODEL_FILENAME,
    TWO_CPU_INSTANCE_BACKENDS,
)

# Triton's SEQUENCE_IDLE_DEFAULT_MICROSECONDS.
SEQUENCE_IDLE_DEFAULT_US = 1_000_000


def complete_config(config: ModelConfig, model_name: str, *, gpu_count: int = 0) -> ModelConfig:
    """A completed copy of ``config`` for the model in folder ``model_name``.

    ``gpu_count`` is the number of GPUs visible to the server; GPU ids are
    ``0 .. gpu_count-1``. The input is left untouched.
    """
    out = ModelConfig()
    out.CopyFrom(config)
    _complete_backend_fields(out, model_name)
    _normalize(out)
    _normalize_instance_groups(out, gpu_count)
    return out


def _complete_backend_fields(config: ModelConfig, model_name: str) -> None:
    if not config.name:
        config.name = model_name
    if not config.platform and config.backend in ("", "tensorflow"):
        config.platform = FILENAME_PLATFORMS.get(config.default_model_filename, "")
    if not config.backend:
        if config.platform:
            config.backend = PLATFORM_BACKENDS.get(config.platform, ("", ""))[0]
        else:
            # Triton picks python when the first version folder holds model.py. Python
            # models are all tritium serves, so a config that names nothing is one.
            filename = config.default_model_filename or PYTHON_MODEL_FILENAME
            config.backend = FILENAME_BACKENDS.get(filename, "")
    if not config.platform:
        config.platform = DEFAULT_PLATFORMS.get(config.backend, "")
    if not config.default_model_filename:
        if config.platform in PLATFORM_BACKENDS:
            config.default_model_filename = PLATFORM_BACKENDS[config.platform][1]
        else:
            config.default_model_filename = BACKEND_FILENAMES.get(config.backend, "")


def _normalize(config: ModelConfig) -> None:
    if not config.HasField("version_policy"):
        config.version_policy.latest.num_versions = 1

    if config.HasField("dynamic_batching"):
        batcher = config.dynamic_batching
        if not batcher.preferred_batch_size and config.max_batch_size > 0:
            batcher.preferred_batch_size.append(config.max_batch_size)

    if config.HasField("sequence_batching"):
        batcher = config.sequence_batching
        if batcher.max_sequence_idle_microseconds == 0:
            batcher.max_sequence_idle_microseconds = SEQUENCE_IDLE_DEFAULT_US
        if (
            batcher.HasField("oldest")
            and not batcher.oldest.preferred_batch_size
            and config.max_batch_size > 0
        ):
            batcher.oldest.preferred_batch_size.append(config.max_batch_size)

    if not config.HasField("ensemble_scheduling"):
        # Touching these marks `optimization` present, so Triton (and we) print it.
        optimization = config.optimization
        if not optimization.HasField("input_pinned_memory"):
            optimization.input_pinned_memory.enable = True
        if not optimization.HasField("output_pinned_memory"):
            optimization.output_pinned_memory.enable = True


def _normalize_instance_groups(config: ModelConfig, gpu_count: int) -> None:
    if config.HasField("ensemble_scheduling"):
        return
    gpus = range(max(gpu_count, 0))
    if not config.instance_group:
        # The implicit group is named after the model itself, without an index.
        config.instance_group.add(name=config.name)

    for index, group in enumerate(config.instance_group):
        if not group.name:
            group.name = f"{config.name}_{index}"
        if group.kind == ModelInstanceGroup.KIND_AUTO:
            on_gpu = len(gpus) > 0 and all(g in gpus for g in group.gpus)
            group.kind = ModelInstanceGroup.KIND_GPU if on_gpu else ModelInstanceGroup.KIND_CPU
        if group.count < 1:
            two = (
                group.kind == ModelInstanceGroup.KIND_CPU
                and config.backend in TWO_CPU_INSTANCE_BACKENDS
            )
            group.count = 2 if two else 1
        if group.kind == ModelInstanceGroup.KIND_GPU and not group.gpus:
            group.gpus.extend(gpus)
