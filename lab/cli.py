"""`memlab` — the lab's command line. No subcommand opens the app.

Each subcommand lives in `lab/commands/<name>.py` with `add_parser(subparsers)` and
`main(args) -> int`. Bad input raises `UsageError` and becomes one line on stderr and exit code 2;
nothing here prints a traceback for a user's mistake. The `--json` paths import neither Textual
nor plotext, so the CLI works on a GPU box that has only torch and transformers.
"""

from __future__ import annotations

import argparse
import os
import sys

from lab.commands import COMMANDS, UsageError
from lab.course.curriculum import CourseNotFound


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (argparse prints the usage block too)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memlab",
        description="GPU Memory Lab: see how PyTorch uses GPU memory by measuring it. "
        "Run with no command to open the lab.",
    )
    from lab import __version__

    parser.add_argument("--version", action="version", version=f"memlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # this process's own command line: the `memlab` script, `python -m lab`
        _quick_exit()
    try:
        return _main(argv)
    except BrokenPipeError:  # `memlab … | head`: the reader left; not an error
        return 0
    finally:
        _flush_stdout()  # also after --help / SystemExit, where the last write may be buffered


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    refused = _check_versions() or _check_home()
    if refused:
        print(f"memlab: error: {refused}", file=sys.stderr)
        return 2
    try:
        if args.command is None:
            return _open_app()
        return args.func(args)
    except (UsageError, CourseNotFound) as e:
        print(f"memlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memlab: interrupted", file=sys.stderr)
        return 130


def _check_versions() -> str | None:
    """An older torch/transformers than validated: the reason to refuse (lab.measure.versions,
    torch-free). A newer one is said by the commands whose numbers used it, once they have."""
    from lab.measure.versions import refusal

    return refusal()


def _check_home() -> str | None:
    """MEMLAB_HOME (progress, runs, challenges, the runner service) must be able to be a
    folder: one line now, rather than a traceback wherever it is first written."""
    from lab.course.progress import ENV_VAR
    from lab.user_files import UserFileError, usable_folder

    home = os.environ.get(ENV_VAR)
    try:
        if home:
            usable_folder(home, ENV_VAR)
    except UserFileError as e:
        return str(e)
    return None


def _quick_exit() -> None:
    """Leave the heap to the process's end. Tearing the modules down at exit, CPython collects
    the whole heap again, more than once: with torch and transformers imported, ~1 s of a core
    after the command is done (`memlab fit`: 1 of its ~6.5 s on a 2-core laptop; a bare
    `import torch, transformers` pays it too). Frozen at exit (after the atexit handlers
    registered later, which run first), those objects go with the process, as a forked
    worker's do (os._exit); the standard streams are still flushed. Only for a process's own
    command line: a caller in a longer-lived process (a test) keeps its collector as it was."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def _flush_stdout() -> None:
    """Flush now, inside our handler: if the reader closed the pipe, point stdout at /dev/null
    so the interpreter's own flush at exit has nowhere to fail (what the Python docs on SIGPIPE
    advise) and no traceback or "Exception ignored" line is printed."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
    except (OSError, ValueError):
        pass


def _open_app() -> int:
    from lab.serve.lifeline import follow_if_served

    follow_if_served()  # a tab of `memlab serve`: exit when the server dies
    try:
        from lab.tui.app import run_app
    except ImportError as e:
        raise UsageError(f"the app needs Textual ({e.name} is not installed); "
                         "install with `pip install -e .`, or use `memlab run … --json`") from None
    run_app()
    return 0


if __name__ == "__main__":
    sys.exit(main())
