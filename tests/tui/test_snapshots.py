"""Snapshots of the main screens at 80×24 and 120×36 (pytest-textual-snapshot).

Deterministic: replayed runs (sim, seed scale: no step times), no CUDA, an empty progress dir.
Update with `--snapshot-update` only after looking at the SVGs (snapshot_report.html).
"""

from __future__ import annotations

import pytest

from lab.reference import REFERENCE_DIR
from lab.snapshots import open_summary
from lab.tui.screens.snapshot_view import SnapshotViewApp

from test_playground import PlaygroundReplay, open_playground
from tui_helpers import FIXTURES, RUNS, make_app, open_first_lesson, run_and_wait, wait_until

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 36), id="120x36")]


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
def test_snapshot_viewer(snap_compare, size):
    # the header names the file by its last folder and name: the same wherever the clone lies
    app = SnapshotViewApp(open_summary(FIXTURES / "h200_snapshot.pickle")[0])
    assert snap_compare(app, terminal_size=size)
