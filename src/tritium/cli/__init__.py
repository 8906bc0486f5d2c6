"""Command-line entry points: `tritium serve` and its tritonserver-compatible flags."""

from __future__ import annotations

from tritium.cli.main import main
from tritium.cli.serve import build_parser as build_serve_parser
from tritium.cli.serve import parse_settings

__all__ = ["build_serve_parser", "main", "parse_settings"]
