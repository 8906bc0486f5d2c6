"""The one clock the server uses for deadlines and statistics (monotonic nanoseconds)."""

from __future__ import annotations

import time

now_ns = time.monotonic_ns
