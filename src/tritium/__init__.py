"""tritium: a Triton-compatible inference server for Python-backend model repositories."""

__version__ = "0.1.0"
