"""Subcommands of `memlab`. Each module: `add_parser(subparsers)` and `main(args) -> int`."""

from __future__ import annotations


class UsageError(Exception):
    """A user's mistake: printed as one line, exit code 2."""


from . import doctor, list_cmd, run, view  # noqa: E402  (UsageError must exist first)

COMMANDS = [list_cmd, run, doctor, view]

__all__ = ["COMMANDS", "UsageError"]
