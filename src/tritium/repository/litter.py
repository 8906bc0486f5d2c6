"""Entries that file systems and model storage tools leave in a model repository.

None of them is part of a model, so the scanner does not take them for models and poll
mode does not take their arrival for a change of one:

- hidden entries (``.git``, editor swap files, the ``..data`` links of a Kubernetes
  ConfigMap or Secret volume, a download tool's temporary files);
- ``SUCCESS.<hash>`` files, which KServe's model agent writes into a model's folder once
  it has downloaded the model (written after the download, so poll mode would otherwise
  reload every model it pulls a second time);
- ``lost+found``, present at the root of every ext4 volume, such as a PersistentVolumeClaim
  mounted as the repository (Triton tries to load it as a model and fails start-up).
"""

from __future__ import annotations

STORAGE_MARKER_PREFIX = "SUCCESS."
FILESYSTEM_FOLDERS = frozenset({"lost+found"})


def is_litter(name: str) -> bool:
    """True for a repository or model folder entry that belongs to no model."""
    return (
        name.startswith(".") or name.startswith(STORAGE_MARKER_PREFIX) or name in FILESYSTEM_FOLDERS
    )
