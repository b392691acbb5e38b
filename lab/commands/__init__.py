"""Subcommands of `memlab`. Each module: `add_parser(subparsers)` and `main(args) -> int`."""

from __future__ import annotations


class UsageError(Exception):
    """A user's mistake: printed as one line, exit code 2."""


def gpu_memory_arg(text: str | None) -> int | None:
    """The --gpu-memory option (run, compare, fit) in bytes, or a one-line UsageError."""
    if not text:
        return None
    from lab.report.units import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise UsageError(f"--gpu-memory: {e}") from None


def seconds_arg(text: str) -> float:
    """A --timeout in seconds: argparse's `type`, through the lab's one number parser (so
    "nan", "inf" and "1e400" are refused in one line, as every number a person types)."""
    import argparse

    from lab.report.numbers import NumberError, parse_number

    try:
        return float(parse_number(text, what="seconds", lo=0, above=True, hi=MAX_SECONDS,
                                  unit="s"))
    except NumberError as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None


MAX_SECONDS = 7 * 24 * 3600  # a week: far beyond any run


from . import compare, dev_cmd, diff, doctor, export_cmd, fit, list_cmd, profile, run, view  # noqa: E402  (UsageError first)
from . import challenge, class_cmd, serve_cmd  # noqa: E402

COMMANDS = [list_cmd, run, doctor, view, diff, profile, compare, fit, export_cmd, dev_cmd, serve_cmd,
            class_cmd, challenge]

__all__ = ["COMMANDS", "UsageError"]
