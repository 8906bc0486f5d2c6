"""L1: read, complete, validate and print Triton model configurations (``config.pbtxt``).

The usual sequence for a model folder::

    config = load_config_file(model_dir, name) or ModelConfig()
    config = complete_config(config, name, gpu_count=gpus)
    validate_config(config, name, gpu_count=gpus)
    config_to_json(config)  # what GET /v2/models/<name>/config returns
"""

from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritium.config.defaults import complete_config
from tritium.config.errors import ConfigError
from tritium.config.fields import input_names, is_decoupled, output_names
from tritium.config.json_codec import config_from_dict, config_to_json
from tritium.config.loader import config_path, load_config_file, parse_config_text
from tritium.config.validation import validate_config

__all__ = [
    "ConfigError",
    "ModelConfig",
    "complete_config",
    "config_from_dict",
    "config_path",
    "config_to_json",
    "input_names",
    "is_decoupled",
    "load_config_file",
    "output_names",
    "parse_config_text",
    "validate_config",
]
