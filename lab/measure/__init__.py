"""Headless measurement engine: never imports textual, plotext or rich (tests/unit checks)."""

from .result import SCHEMA, RunResult
from .trace import CATEGORIES

__all__ = ["CATEGORIES", "SCHEMA", "RunResult"]
