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


from . import compare, dev_cmd, diff, doctor, export_cmd, fit, list_cmd, profile, run, view  # noqa: E402  (UsageError first)
from . import challenge, class_cmd, serve_cmd  # noqa: E402

COMMANDS = [list_cmd, run, doctor, view, diff, profile, compare, fit, export_cmd, dev_cmd, serve_cmd,
            class_cmd, challenge]

__all__ = ["COMMANDS", "UsageError"]
