"""Subcommands of `memlab`. Each module: `add_parser(subparsers)` and `main(args) -> int`."""

from __future__ import annotations


class UsageError(Exception):
    """A user's mistake: printed as one line, exit code 2."""


from . import compare, doctor, export_cmd, fit, list_cmd, run, view  # noqa: E402  (UsageError first)

COMMANDS = [list_cmd, run, doctor, view, compare, fit, export_cmd]

__all__ = ["COMMANDS", "UsageError"]
