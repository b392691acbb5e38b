"""Helpers of the TUI tests: a replaying runner, app factory, waiting for runs, screen text."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

from lab.course.curriculum import load_course
from lab.course.progress import Progress
from lab.runner.replay import ReplayRunner
from lab.tui.app import MemLabApp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = FIXTURES / "runs"
REFERENCE = FIXTURES / "reference"
NO_REFERENCE = FIXTURES / "no-reference"  # does not exist: no recorded runs
COURSE = load_course()


def make_app(runner=None, *, references: Path = NO_REFERENCE, course=None, gpu=None,
             **runner_kw) -> MemLabApp:
    """An app on the replay runner, no CUDA GPU (deterministic), progress from MEMLAB_HOME;
    recordings play back instantly. `notices(app)` lists what it notified."""
    runner = runner or ReplayRunner(RUNS, **runner_kw)
    app = MemLabApp(runner=runner, course=course or COURSE, progress=Progress.load(), gpu=gpu,
                    reference_root=references, playback_seconds=0.0)
    return record_notices(app)


@dataclass(frozen=True)
class Notice:
    message: str
    title: str
    severity: str


def record_notices(app):
    """Keep every notification the app shows (through the public `notify`, which every widget's
    `notify` calls), instead of reading Textual's private `_notifications`."""
    seen: list[Notice] = []
    notify = app.notify

    def recording(message, *, title="", severity="information", timeout=None, markup=True):
        seen.append(Notice(str(message), title, severity))
        return notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    app.notify = recording
    app.test_notices = seen
    return app


def notices(app) -> list[Notice]:
    return app.test_notices


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


async def answer_predict_prompt(pilot, prediction: str | None) -> bool:
    """If the predict-the-peak prompt is up: type the prediction and Enter, or Esc to skip."""
    from lab.tui.screens.predict import PredictScreen

    await pilot.pause()
    if not isinstance(pilot.app.screen, PredictScreen):
        return False
    if prediction is None:
        await pilot.press("escape")
    else:
        await pilot.press(*prediction, "enter")
    await pilot.pause()
    return True


async def run_and_wait(pilot, key: str = "r", prediction: str | None = None) -> None:
    """Press r (or y), answer the prediction prompt if it comes (skip unless a prediction is
    given), let the worker finish and the screen handle every message it posted."""
    screen = pilot.app.screen
    before = screen.finished_runs
    await pilot.press(key)
    await answer_predict_prompt(pilot, prediction)
    await wait_until(pilot, lambda: screen.finished_runs > before, tries=1500)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def text_of(screen, selector: str, width: int = 200) -> str:
    """The plain text a Static shows (Rich tables and Text included), or the Statics inside a
    container (a failure's words and the message block under them)."""
    from rich.console import Console
    from textual.widgets import Static

    widget = screen.query_one(selector)
    contents = [widget.content] if isinstance(widget, Static) or not widget.children else [
        s.content for s in widget.query(Static)]
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for content in contents:
        console.print(content)
    return console.export_text()


def screen_text(app) -> str:
    """What the terminal shows right now, as plain text (the screenshot's characters)."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


NUMBER = re.compile(r"(\d+(?:,\d{3})*(?:\.\d+)?)\s*(GiB|MiB|KiB|GB|MB|kB|B)?\b")
UNITS = {None: 1e9, "GB": 1e9, "MB": 1e6, "kB": 1e3, "B": 1, "GiB": 2**30, "MiB": 2**20,
         "KiB": 2**10}


def numbers_near(text: str, answer_gb: float, within: float = 0.05) -> list[str]:
    """Every number in `text` within `within` of the answer, read as GB (bare or 'x GB'), or
    as bytes in the unit written after it ('4,400 MB', '4,400,200,000 B', '4.10 GiB')."""
    hits = []
    for m in NUMBER.finditer(text):
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        as_gb = value * UNITS[m.group(2)] / 1e9
        if abs(as_gb - answer_gb) <= within * answer_gb or (
                m.group(2) is None and abs(value - answer_gb) <= within * answer_gb):
            hits.append(m.group(0))
    return hits
