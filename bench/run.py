"""Entry point: `.venv/bin/python bench/run.py [--scenarios ...] [--rounds N] [--quick]`."""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ itself is on sys.path; the modules import each other as `bench.*`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
