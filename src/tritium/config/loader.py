"""Read a model's ``config.pbtxt`` (or the ``--model-config-name`` variant) from disk."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritium.config.errors import ConfigError

CONFIG_FILE = "config.pbtxt"
CUSTOM_CONFIG_FOLDER = "configs"


def config_path(model_dir: Path, config_name: str = "") -> Path:
    """The file Triton reads for this model.

    With ``config_name`` (Triton's ``--model-config-name``) that is
    ``<model_dir>/configs/<config_name>.pbtxt`` when it exists; otherwise, and always
    without a name, ``<model_dir>/config.pbtxt``.
    """
    if config_name:
        custom = model_dir / CUSTOM_CONFIG_FOLDER / f"{config_name}.pbtxt"
        if custom.is_file():
            return custom
    return model_dir / CONFIG_FILE


def parse_config_text(
    text: str | bytes, model_name: str, file_name: str = CONFIG_FILE
) -> ModelConfig:
    """Parse protobuf text format into a ModelConfig; ConfigError names model, file and line:col."""
    config = ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise ConfigError(
            f"failed to read text proto from {file_name} for model '{model_name}': {exc}"
        ) from None
    return config


def load_config_file(model_dir: Path, model_name: str, config_name: str = "") -> ModelConfig | None:
    """The parsed configuration of the model in ``model_dir``, or None when it has none.

    A model without a configuration file is still a model: Triton fills in everything it
    can (see ``complete_config``). Errors never carry the absolute path, only the file's
    name inside the model folder, because the message reaches clients.
    """
    path = config_path(model_dir, config_name)
    file_name = path.relative_to(model_dir).as_posix()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(
            f"failed to read text proto from {file_name} for model '{model_name}': "
            f"{exc.strerror or type(exc).__name__}"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"failed to read text proto from {file_name} for model '{model_name}': "
            f"not valid UTF-8 at byte {exc.start}"
        ) from None
    return parse_config_text(text, model_name, file_name)
