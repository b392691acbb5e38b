"""Helpers of the TUI tests: a replaying runner, app factory, waiting for runs."""

from __future__ import annotations

from pathlib import Path

from lab.curriculum import load_course
from lab.progress import Progress
from lab.runner.replay import ReplayRunner
from lab.tui.app import MemLabApp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = FIXTURES / "runs"
REFERENCE = FIXTURES / "reference"
NO_REFERENCE = FIXTURES / "no-reference"  # does not exist: no recorded runs
COURSE = load_course()


def make_app(runner=None, *, references: Path = NO_REFERENCE, **runner_kw) -> MemLabApp:
    """An app on the replay runner, no CUDA GPU (deterministic), progress from MEMLAB_HOME."""
    runner = runner or ReplayRunner(RUNS, **runner_kw)
    return MemLabApp(runner=runner, course=COURSE, progress=Progress.load(), gpu=None,
                     reference_root=references)


async def open_first_lesson(pilot) -> None:
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()


async def wait_until(pilot, predicate, tries: int = 200, step: float = 0.02) -> None:
    for _ in range(tries):
        if predicate():
            return
        await pilot.pause(step)
    raise AssertionError("condition not reached")


async def run_and_wait(pilot) -> None:
    """Press r, let the worker finish and the screen handle every message it posted."""
    screen = pilot.app.screen
    before = screen.finished_runs
    await pilot.press("r")
    await wait_until(pilot, lambda: screen.finished_runs > before, tries=1500)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def text_of(screen, selector: str, width: int = 200) -> str:
    """The plain text a Static shows (Rich tables and Text included)."""
    from rich.console import Console
    from textual.widgets import Static

    content = screen.query_one(selector).content
    console = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(content)
    return console.export_text()
