"""The snapshot viewer screen: a real H200 snapshot, keys, Esc back (in the app) and Esc/q
out (standalone, `memlab view FILE --app`), and gzip-compressed snapshots."""

from __future__ import annotations

import gzip
import shutil

import pytest
from textual.widgets import DataTable

from lab.snapshots import open_summary
from lab.tui.screens import HomeScreen, LessonScreen
from lab.tui.screens.snapshot_view import SnapshotViewApp, SnapshotViewScreen

from tui_helpers import FIXTURES, make_app, screen_text, wait_until

SNAPSHOT = FIXTURES / "h200_snapshot.pickle"


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_standalone_viewer_escape_and_q_leave_instead_of_a_blank_screen():
    for key in ("escape", "q"):
        app = SnapshotViewApp(open_summary(SNAPSHOT)[0])
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, SnapshotViewScreen)
            assert "esc back" in screen_text(app).lower()
            await pilot.press(key)
            await pilot.pause()
            assert not app.is_running, key  # it left; no blank screen that no key leaves


@pytest.mark.slow  # the whole app with a snapshot: keeps the quick tier under 2 minutes
async def test_viewer_in_the_app_shows_the_peak_moves_and_goes_back(tmp_path):
    # Given a compressed snapshot (the shipped H200 ones are *.profile.pkl.gz)
    packed = tmp_path / "baseline.profile.pkl.gz"
    with open(SNAPSHOT, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("o")
        await pilot.pause()
        await pilot.press(*str(packed), "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, SnapshotViewScreen), tries=1500)
        await pilot.pause()
        screen = app.screen
        text = screen_text(app)
        assert "peak 739.41 MB" in text  # the lab's units (GB = 10⁹ stepping down), not MiB
        assert "GiB" not in text and "MiB" not in text
        assert screen.query_one("#blocks", DataTable).row_count > 0
        before = screen.plot.cursor
        await pilot.press("0", "right")
        assert screen.plot.cursor > before or screen.plot.cursor == screen.plot.x_max
        await pilot.press("p")
        assert screen.plot.cursor == screen.summary.peak_time_us
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)  # back where it was opened, not blank


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_a_lessons_recorded_snapshot_opens_with_s(tmp_path):
    from lab.course.reference import REFERENCE_DIR

    # Given an install whose lesson 01 has a recorded allocator snapshot beside its runs
    root = tmp_path / "reference"
    shutil.copytree(REFERENCE_DIR / "linear-baseline", root / "linear-baseline")
    with open(SNAPSHOT, "rb") as src, gzip.open(root / "linear-baseline" /
                                                "baseline.profile.pkl.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    app = make_app(references=root)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen)
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, SnapshotViewScreen), tries=1500)
        assert "baseline.profile.pkl.gz" in screen_text(app)


def test_an_allocation_with_only_the_labs_own_frames_says_so_and_lists_none():
    # Given an allocation whose stack holds only torch's dispatch and the lab's tracker (made
    # on the autograd engine's thread), the viewer does not say "(no Python stack)" and then
    # list those frames: it says there is no frame of the program, and why
    from lab.tui.screens.snapshot_view import frame_lines, stack_heading

    machinery = [{"filename": "/x/lab/measure/tracker.py", "line": 90, "name": "__torch_dispatch__"},
                 {"filename": "/x/torch/utils/_python_dispatch.py", "line": 1, "name": "f"}]
    assert stack_heading(machinery) == "no frame of your program on the stack"
    assert len(frame_lines(machinery)) == 1 and "lab's tracker" in frame_lines(machinery)[0]
    mine = [{"filename": "/home/me/train.py", "line": 12, "name": "step"}] + machinery
    assert stack_heading(mine).startswith("me/train.py:12 step")
    assert frame_lines(mine) == ["me/train.py:12 step"]
    assert stack_heading([]) == "(no Python stack)" and frame_lines([]) == []


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_x_explains_and_replays_the_out_of_memory_of_lesson_22s_recorded_snapshot():
    from pathlib import Path

    from lab.tui.screens.dialogs import TextScreen

    # lesson 22's baseline at its out-of-memory, recorded on a GPU (bench/oom_replay_gpu.py)
    path = (Path(__file__).resolve().parents[2] / "assets" / "reference" / "allocator-tuning"
            / "baseline.profile.pkl.gz")
    app = SnapshotViewApp(open_summary(path)[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "x why" in screen_text(app)  # the key is offered: the snapshot has an OOM
        await pilot.press("o", "x")
        await wait_until(pilot, lambda: isinstance(app.screen, TextScreen), tries=1500)
        page = str(app.screen.text)
        # what `memlab view` prints: the verdict and the replay, the GPU's rerun's answers
        assert "verdict: FRAGMENTATION" in page
        rows = {line.split()[0]: line for line in page.splitlines()
                if line.startswith(("expandable_segments", "max_split_size_mb:128"))}
        assert " yes " in rows["expandable_segments:True"]
        assert " yes " in rows["max_split_size_mb:128"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, SnapshotViewScreen)  # back to the viewer


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_a_snapshot_without_an_oom_neither_shows_nor_takes_x():
    from pathlib import Path

    path = (Path(__file__).resolve().parents[2] / "assets" / "reference" / "mixed-precision"
            / "bf16.profile.pkl.gz")  # a training step on the H200, no out-of-memory in it
    app = SnapshotViewApp(open_summary(path)[0])
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert "x why" not in screen_text(app)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, SnapshotViewScreen)
