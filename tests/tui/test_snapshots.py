"""Snapshots of every screen at 80×24 and 120×36 (pytest-textual-snapshot, `snap_compare`).

80×24 is a first-class size: nothing cut, tables that pick their columns by width, dialogs drawn
over the screen they ask about. The screens and states covered, each at both sizes:

  home                     the course map of a new learner (every status "not started")
  calibration              `k` over the course map of a learner who predicted, played back a
                           recording (◐ seen) and predicted another lesson (◔ predicted)
  lesson_text              lesson 01's text tab before any result
  lesson_experiment        lesson 01's Experiment tab: controls, the marked variant's code
  experiment_technique     lesson 08's Experiment tab on bf16: the autocast block it runs
  predict                  `r`'s predict-the-peak dialog over lesson 01
  confirm_cpu_at_seed      the cpu-at-seed-scale confirmation, over the lesson
  results                  lesson 01 run here (no recordings installed): your run leads
  results_h200_recording   lesson 18's H200 recording played back (OOMs, a 16 GiB cap, the
                           Δ against a baseline that ran out of memory)
  results_yours_beside     lesson 01 after `r` then `y`: your run beside the recording, the
                           difference first, the recording's notes folded, the version line
  inspector                the timeline inspector on lesson 01's result
  quiz                     LoRA's quiz (lesson 16: choices of two hundred characters wrap)
  help                     `?` over the course map
  playground               the playground after comparing two combinations
  snapshot_viewer          a memory snapshot in the viewer
  diff_view                two H200 recordings side by side (lesson 08's baseline and bf16)
  too_small                the notice under 80×24 (one size: 70×20)

Deterministic: replayed runs (sim, seed scale: no step times), no CUDA, an empty progress dir,
no blinking cursors. Made with the versions CI pins (.ci/constraints.txt: Textual 8.2.8,
textual-plotext 1.0.1, plotext 5.3.2). Update with `--snapshot-update` only after looking at the
SVGs (snapshot_report.html). The full suite runs them (`slow`): ~2 s each.
"""

from __future__ import annotations

import pytest

from pathlib import Path

from lab.course.progress import Progress
from lab.course.reference import REFERENCE_DIR
from lab.snapshots import open_summary
from lab.snapshots.diff import diff_files
from lab.tui.screens.diff_view import DiffViewApp
from lab.tui.screens.snapshot_view import SnapshotViewApp

from test_playground import PlaygroundReplay, open_playground
from tui_helpers import (COURSE, FIXTURES, RUNS, make_app, open_first_lesson, run_and_wait,
                         wait_until)

COURSE_LESSONS = COURSE.lessons

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 36), id="120x36")]
# the full suite's: each one starts an app and renders a screen; SVGs made with the pinned Textual
pytestmark = [pytest.mark.slow, pytest.mark.pinned("textual", "textual-plotext", "plotext")]


def no_blink(app) -> None:
    for box in app.screen.query("Input"):  # no blinking cursor in a snapshot
        box.cursor_blink = False


async def open_lesson(pilot, key: str) -> None:
    await pilot.pause()
    pilot.app.open_lesson(pilot.app.course.find(key))
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_home(snap_compare, size):
    assert snap_compare(make_app(), terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_lesson_experiment(snap_compare, size):
    async def go(pilot):
        await open_first_lesson(pilot)
        await pilot.press("2")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_results(snap_compare, size):
    async def go(pilot):
        await open_first_lesson(pilot)
        await run_and_wait(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_inspector(snap_compare, size):
    async def go(pilot):
        await open_first_lesson(pilot)
        await run_and_wait(pilot)
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("left", "left")

    assert snap_compare(make_app(), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_results_h200_recording(snap_compare, size):
    # no GPU: after the prediction, the H200 recording of lesson 18 (OOMs, a 16 GiB cap)
    async def go(pilot):
        await pilot.pause()
        app = pilot.app
        app.open_lesson(next(l for l in app.course.lessons if l.id == "out-of-memory"))
        await pilot.pause()
        await run_and_wait(pilot, prediction="17")
        await pilot.pause(0.3)

    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_playground(snap_compare, size):
    async def go(pilot):
        screen = await open_playground(pilot)
        screen.query_one("#mode").value = "cpu"  # the replayed runs are cpu, small
        await pilot.pause()
        screen.query_one("#combos").value = "baseline ckpt"
        await pilot.press("r")
        await wait_until(pilot, lambda: screen.comparison is not None, tries=1500)
        await pilot.app.workers.wait_for_complete()
        for box in screen.query("Input"):  # no blinking cursor in a snapshot
            box.cursor_blink = False
        screen.query_one("#results").focus()
        await pilot.pause(0.3)

    assert snap_compare(make_app(PlaygroundReplay(RUNS)), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_calibration(snap_compare, size):
    # Given a learner who predicted lesson 01 and played its recording back, and predicted 02
    progress = Progress.load()
    first, second = (lesson.id for lesson in COURSE_LESSONS[:2])
    progress.commit_prediction(first, 4.0)
    progress.reveal(first, 4.4002, "H200 recording")
    progress.record_playback(first)
    progress.commit_prediction(second, 9.0)

    async def go(pilot):
        await pilot.pause()
        await pilot.press("k")
        await pilot.pause()

    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_lesson_text(snap_compare, size):
    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size,
                        run_before=open_first_lesson)


@pytest.mark.parametrize("size", SIZES)
def test_experiment_technique(snap_compare, size):
    async def go(pilot):
        await open_lesson(pilot, "08")
        await pilot.press("2")
        await pilot.pause()
        pilot.app.screen.query_one("#v-bf16").focus()
        await pilot.pause()

    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_predict(snap_compare, size):
    async def go(pilot):
        await open_first_lesson(pilot)
        await pilot.press("r")
        await pilot.pause()
        no_blink(pilot.app)

    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_confirm_cpu_at_seed(snap_compare, size):
    async def go(pilot):
        await open_first_lesson(pilot)
        pilot.app.screen.query_one("#mode").value = "cpu"
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("escape")  # no prediction: then the dialog asks
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_results_yours_beside(snap_compare, size):
    async def go(pilot):
        await open_first_lesson(pilot)
        await run_and_wait(pilot, "r", prediction="4.4")
        await run_and_wait(pilot, "y")
        await pilot.pause(0.3)

    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_quiz(snap_compare, size):
    async def go(pilot):
        await open_lesson(pilot, "lora-adapters")
        await pilot.press("5")
        await pilot.pause()
        no_blink(pilot.app)

    assert snap_compare(make_app(references=REFERENCE_DIR), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, size):
    async def go(pilot):
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=size, run_before=go)


@pytest.mark.parametrize("size", SIZES)
def test_diff_view(snap_compare, size):
    ref = Path(REFERENCE_DIR) / "mixed-precision"
    assert snap_compare(DiffViewApp(diff_files(ref / "baseline.json", ref / "bf16.json")),
                        terminal_size=size)


def test_too_small(snap_compare):
    assert snap_compare(make_app(), terminal_size=(70, 20))


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_viewer(snap_compare, size):
    # the header names the file by its last folder and name: the same wherever the clone lies
    app = SnapshotViewApp(open_summary(FIXTURES / "h200_snapshot.pickle")[0])
    assert snap_compare(app, terminal_size=size)
