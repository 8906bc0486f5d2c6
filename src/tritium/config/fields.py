"""Small questions other layers ask of a configuration, answered in one place."""

from __future__ import annotations

from tritonclient.grpc.model_config_pb2 import ModelConfig


def input_names(config: ModelConfig) -> list[str]:
    """Input tensor names in configuration order."""
    return [tensor.name for tensor in config.input]


def output_names(config: ModelConfig) -> list[str]:
    """Output tensor names in configuration order."""
    return [tensor.name for tensor in config.output]


def is_decoupled(config: ModelConfig) -> bool:
    """True when the model may send zero or many responses per request."""
    return config.model_transaction_policy.decoupled
