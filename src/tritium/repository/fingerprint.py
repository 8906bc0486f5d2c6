"""A model folder's fingerprint: what poll mode compares to see that a model changed."""

from __future__ import annotations

import os
from pathlib import Path

from tritium.repository.litter import is_litter

Fingerprint = frozenset[tuple[str, int, int]]


def model_fingerprint(model_dir: Path) -> Fingerprint:
    """Every file under ``model_dir`` with its modification time and size, and every folder
    (blocking: run it off the event loop). An added, removed, rewritten or touched file
    changes it; hidden entries (editor swap files), ``__pycache__`` written by workers and
    KServe's ``SUCCESS.*`` download markers do not."""
    entries: list[tuple[str, int, int]] = []
    for folder, dirs, files in os.walk(model_dir, followlinks=True):
        dirs[:] = [d for d in dirs if not is_litter(d) and d != "__pycache__"]
        relative = os.path.relpath(folder, model_dir)
        # Folders count by name only: their times change when a worker writes its
        # bytecode cache, which is not a change of the model.
        entries.extend((os.path.join(relative, d), 0, 0) for d in dirs)
        for name in files:
            if is_litter(name):
                continue
            try:
                stat = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            entries.append((os.path.join(relative, name), stat.st_mtime_ns, stat.st_size))
    return frozenset(entries)
