"""Served mode: the one place that says what a lab served to browsers may not do.

`memlab serve` starts one app process per browser tab with `MEMLAB_SERVED=1` and the learner's
own data folder as `MEMLAB_HOME`. A learner in a browser types into a process on the server,
so in that process nothing reads or writes outside the lab's data folder: no snapshot opened
from an arbitrary path, no `profile` of a script, no `--config` file, no screenshot written to
the server's disk (it goes to the browser as a download instead). Every such feature asks here.

Headless: no Textual, no aiohttp.
"""

from __future__ import annotations

import os
from pathlib import Path

from lab.served import SERVED_ENV, served  # noqa: F401  (the fact, beside what it forbids)

CLASS_ENV = "MEMLAB_CLASS"  # the workshop folder whose class state a served app follows
LEARNER_ENV = "MEMLAB_LEARNER"  # the learner's (sanitised) name
TEST_STATE_ENV = "MEMLAB_TEST_STATE"  # "1": the app writes test-state.json (browser test)
SERVER_PID_ENV = "MEMLAB_SERVER_PID"  # the server's pid: the app exits when it dies (lifeline.py)
CODE_ENV = "MEMLAB_LEARNER_CODE"  # the code another browser needs to take this learner's name


class Refused(Exception):
    """What a served lab does not do; the message is one line for the learner."""


def refuse_if_served(what: str) -> None:
    """Raise `Refused` for a feature that is off in a served lab (`what` names it)."""
    if served():
        raise Refused(f"{what} is off in a lab served to a browser: it would read or write "
                      "files on the server outside your data folder")


LOCAL_ONLY = ("This lesson is off in a lab served to a browser: it profiles training scripts as "
              "`memlab profile` does and ends with yours, which a served lab never runs on its "
              "server. Run memlab on your own machine for it; the text and the quiz are here.")


def lesson_refusal(lesson) -> str | None:
    """Why a lesson does not run here (one line for the screen), or None: a `local_only`
    lesson (lesson.toml) in a served lab."""
    return LOCAL_ONLY if served() and getattr(lesson, "local_only", False) else None


def allowed_path(path: str | os.PathLike, what: str = "that file") -> Path:
    """`path` itself; in a served lab, only when it lies inside the learner's data folder
    (symbolic links followed first: a link inside pointing outside is outside). Every path a
    served tab lets a learner name goes through here (the palette's "Diff two runs"); the file
    is then read through lab.user_files (a regular file, bounded)."""
    if not served():
        return Path(path).expanduser()
    from lab.course.progress import data_dir

    home = data_dir().resolve()
    try:
        # relative paths are taken inside the data folder; `~` is not expanded: it is the
        # server account's home, not the learner's
        resolved = (home / Path(path)).resolve()
    except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL in the name
        resolved = None
    if resolved is None or not resolved.is_relative_to(home):
        raise Refused(f"{what}: a lab served to a browser opens files only inside your data "
                      f"folder on the server ({home})")
    return resolved


def learner() -> str | None:
    return os.environ.get(LEARNER_ENV) or None


__all__ = ["CLASS_ENV", "CODE_ENV", "LEARNER_ENV", "LOCAL_ONLY", "Refused", "SERVED_ENV",
           "SERVER_PID_ENV", "TEST_STATE_ENV", "allowed_path", "learner", "lesson_refusal",
           "refuse_if_served", "served"]
