"""L2: model repositories on disk: which models exist, their versions, and version states."""

from tritium.repository.scan import (
    DUPLICATE_REASON,
    DuplicateModelError,
    ModelSource,
    RepositoryError,
    scan_repositories,
)
from tritium.repository.state import ModelState
from tritium.repository.versions import (
    VersionSelection,
    available_versions,
    is_version_folder_name,
    select_versions,
    versions_to_load,
)

__all__ = [
    "DUPLICATE_REASON",
    "DuplicateModelError",
    "ModelSource",
    "ModelState",
    "RepositoryError",
    "VersionSelection",
    "available_versions",
    "is_version_folder_name",
    "scan_repositories",
    "select_versions",
    "versions_to_load",
]
