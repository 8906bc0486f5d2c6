"""Every option of `tritium serve`, held in one frozen, validated dataclass.

Field names are `tritonserver`'s flag names with dashes turned into underscores, and the
defaults are Triton's, so a deployment can keep its arguments. The command line
(`tritium.cli`) is generated from these fields: each field's metadata carries its help
text and, where the field's type is not enough, how its flag is spelled or parsed.
The fields are declared by group in the ``settings_*`` modules (the process, the model
repository, the endpoints, the features); ``Settings`` is all of them, in that order.
Constructing a `Settings` validates it (`settings_checks`); an invalid combination raises
`ValueError` with a message naming the flag, so the same checks serve the CLI and
programmatic callers.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritium.frontends.restricted import RestrictedApis
from tritium.server import settings_checks as checks
from tritium.server.settings_endpoints import EndpointSettings
from tritium.server.settings_features import FeatureSettings
from tritium.server.settings_models import ModelRepositorySettings
from tritium.server.settings_runtime import RuntimeSettings


# Dataclass fields come from the bases in reverse order: runtime, model repository,
# endpoints, then features (the order of `tritium serve --help`).
@dataclass(frozen=True)
class Settings(FeatureSettings, EndpointSettings, ModelRepositorySettings, RuntimeSettings):
    """Server options; see each field's help text (shown by `tritium serve --help`)."""

    @property
    def http_restrictions(self) -> RestrictedApis:
        return checks.http_restrictions(self.http_restricted_api)

    @property
    def grpc_restrictions(self) -> RestrictedApis:
        return checks.grpc_restrictions(self.grpc_restricted_protocol)

    @property
    def auto_complete_config(self) -> bool:
        """Whether missing model configuration may be derived (Triton's default: yes)."""
        return not self.disable_auto_complete_config

    def __post_init__(self) -> None:
        # Frozen for its users: the coerced values are set once, here, then checked.
        for name, value in checks.normalized(vars(self)).items():
            object.__setattr__(self, name, value)
        checks.check(vars(self))
