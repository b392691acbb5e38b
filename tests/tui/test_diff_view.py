"""The diff screen (lab/tui/screens/diff_view.py): two H200 recordings side by side, the
difference coloured; reached from the command palette ("Diff two runs") and `memlab diff --app`."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from lab.snapshots.diff import diff_files
from lab.tui.screens.diff_view import DiffViewApp, DiffViewScreen, parse_pair

from tui_helpers import make_app, notices, text_of, wait_until

REF = Path(__file__).resolve().parents[2] / "assets" / "reference" / "mixed-precision"
A, B = REF / "baseline.json", REF / "bf16.json"


async def test_two_runs_side_by_side_with_the_difference_coloured():
    d = diff_files(A, B)
    app = DiffViewApp(d)
    async with app.run_test(size=(100, 36)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiffViewScreen)
        assert text_of(screen, "#headline").startswith("bf16 vs baseline: peak −2.70 GB")
        side_a, side_b = text_of(screen, "#side-a"), text_of(screen, "#side-b")
        assert "peak 14.95 GB" in side_a and "peak 12.24 GB" in side_b
        assert "recorded on an NVIDIA H200" in side_a and "activations" in side_b
        cats = screen.query_one("#categories", DataTable)
        assert cats.row_count == len(d.by_category_delta)
        # the largest move (temporaries −1.65 GB) is first, green (less in B) and bold
        first = cats.get_row_at(0)
        assert first[0] == "temporaries" and str(first[3]) == "−1.65 GB"
        assert "green" in str(first[3].style) and "bold" in str(first[3].style)
        zero = [r for r in map(cats.get_row_at, range(cats.row_count)) if str(r[3]) == "±0 B"]
        assert zero and all("dim" in str(r[3].style) for r in zero)
        assert screen.query_one("#sites", DataTable).row_count == len(d.top_sites) > 0
        await pilot.press("escape")  # alone on the stack: leaves the app
        await pilot.pause()
    assert app.return_code in (0, None)


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_palette_entry_asks_for_two_files_and_opens_the_diff():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        [cmd] = [c for c in app.get_system_commands(app.screen) if c.title == "Diff two runs"]
        cmd.callback()
        await pilot.pause()
        app.screen.query_one(Input).value = f"{A} {B}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, DiffViewScreen), tries=500)
        assert app.screen.diff.peak_delta_bytes < 0
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DiffViewScreen)
        # a file that is not there: a notification, the app keeps running
        cmd.callback()
        await pilot.pause()
        app.screen.query_one(Input).value = f"{A} missing.json"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, DiffViewScreen)
        assert any("no such file" in str(n.message) for n in notices(app))


def test_parse_pair():
    assert parse_pair('a.json "my run.pkl"') == ("a.json", "my run.pkl")
    for bad in ("a.json", "a b c", '"unclosed'):
        with pytest.raises(ValueError):
            parse_pair(bad)
