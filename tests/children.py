"""Waiting for a child process in a test: a child that died is noticed at once, and the test
fails with the end of its stderr, instead of waiting out the timeout (issue 33: a zygote that
died under load made its fixture wait 300 s, then error without a reason)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

TAIL_CHARS = 2000


def stderr_tail(path: str | Path | None) -> str:
    if path is None:
        return ""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return f"; its stderr ends:\n{text[-TAIL_CHARS:]}" if text else "; its stderr is empty"


def wait_ready(ready, alive, timeout: float, what: str, stderr: str | Path | None = None) -> None:
    """Wait until the threading.Event `ready` is set, checking `alive()` ten times a second."""
    deadline = time.monotonic() + timeout
    while not ready.wait(0.1):
        if not alive():
            pytest.fail(f"{what} died before it was ready{stderr_tail(stderr)}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{what} was alive but not ready after {timeout:.0f} s"
                        f"{stderr_tail(stderr)}", pytrace=False)
