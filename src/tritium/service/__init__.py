"""L4: the transport-neutral service API and the models behind it."""

from tritium.service.models import LoadOptions, ModelManager
from tritium.service.service import Service

__all__ = ["LoadOptions", "ModelManager", "Service"]
