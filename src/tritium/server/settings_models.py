"""The options of the model repository and of how models are loaded and managed."""

from __future__ import annotations

from dataclasses import dataclass

from tritium.server import settings_checks as checks
from tritium.server.settings_field import opt


@dataclass(frozen=True)
class ModelRepositorySettings:
    """Model repository options (part of ``Settings``)."""

    # --- Model repository ---------------------------------------------------------------
    model_repository: tuple[str, ...] = opt(
        (),
        "Path of a model repository directory, or a cloud location served from a local "
        "copy (s3://bucket/path, s3://host:port/bucket/path, gs://bucket/path, "
        "as://account/container/path). With several repositories, a model name "
        "found in more than one of them is not served.",
        "Model Repository",
        aliases=("--model-store",),
        metavar="<path>",
    )
    exit_on_error: bool = opt(
        True,
        "Exit if an error occurs during initialization (e.g. a model fails to load).",
        "Model Repository",
    )
    disable_auto_complete_config: bool = opt(
        False,
        "Do not auto-complete model configurations: every model needs a config.pbtxt that "
        "specifies all required settings.",
        "Model Repository",
        kind="switch",
        deprecated_alias="--strict-model-config",
    )
    strict_readiness: bool = opt(
        True,
        "If true, /v2/health/ready reports ready only when the server is live and every "
        "model is ready; if false, it reports ready as soon as the server is live.",
        "Model Repository",
    )
    model_control_mode: str = opt(
        "none",
        'How models are managed. "none": load every model at start-up and never change '
        'them. "poll": watch the repositories (every --repository-poll-secs) and load, '
        'reload or unload models as they change. "explicit": load and unload only through '
        "the model control API; at start-up load only the models named by --load-model.",
        "Model Repository",
        choices=checks.MODEL_CONTROL_MODES,
        fold_case=True,
    )
    repository_poll_secs: int = opt(
        15,
        "Seconds between two scans of the model repositories. Used only with "
        "--model-control-mode=poll.",
        "Model Repository",
    )
    load_model: tuple[str, ...] = opt(
        (),
        "Model to load at start-up, or '*' (given alone) for every model. Requires "
        "--model-control-mode=explicit.",
        "Model Repository",
        metavar="<model>",
    )
    model_config_name: str = opt(
        "",
        "Name of an alternative configuration to load for every model: "
        "<model>/configs/<name>.pbtxt is used instead of config.pbtxt where it exists. "
        "Must not contain spaces.",
        "Model Repository",
        metavar="<name>",
    )
    model_load_thread_count: int = opt(
        4, "Number of models loaded concurrently.", "Model Repository"
    )
    model_load_retry_count: int = opt(
        0, "Number of times a failed model load is retried.", "Model Repository"
    )
