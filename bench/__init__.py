"""Side-by-side benchmarks of tritium against real NVIDIA Triton (see bench/README.md)."""

from __future__ import annotations
