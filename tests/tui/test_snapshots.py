"""Snapshots of the main screens at 80×24 and 120×36 (pytest-textual-snapshot).

Deterministic: replayed runs (sim, seed scale: no step times), no CUDA, an empty progress dir.
Update with `--snapshot-update` only after looking at the SVGs (snapshot_report.html).
"""

from __future__ import annotations

import pytest

from tui_helpers import make_app, open_first_lesson, run_and_wait

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
