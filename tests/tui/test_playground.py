"""The playground screen: loads its workloads off the UI thread, explains itself, runs with r,
shows every combination's result and timeline, clears old results when the workload changes.
Runs are replayed from real worker output (tests/tui/record_playground.py)."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Select

from lab.workloads import TrainConfig
from lab.runner.replay import ReplayRunner
from lab.tui.screens.playground import PlaygroundScreen

from tui_helpers import RUNS, make_app, screen_text, wait_until


class PlaygroundReplay(ReplayRunner):
    """Every playground request is variant "combo": pick the recording by combination."""

    def path_for(self, req):
        label = TrainConfig.from_dict(req.params["config"]).label
        return self.root / "playground" / f"{label}.{req.mode}-{req.scale}.jsonl"


async def open_playground(pilot) -> PlaygroundScreen:
    await pilot.pause()
    await pilot.press("g")
    screen = pilot.app.screen
    assert isinstance(screen, PlaygroundScreen)
    await wait_until(pilot, lambda: screen.catalog is not None, tries=1500)
    await pilot.pause()
    return screen


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_the_playground_explains_itself_and_loads_its_workloads_off_the_ui_thread():
    app = make_app(PlaygroundReplay(RUNS))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("g")
        screen = app.screen
        # the screen is up before the workloads are listed (that import takes seconds)
        assert "Loading the workloads" in screen_text(app) or screen.catalog is not None
        await wait_until(pilot, lambda: screen.catalog is not None, tries=1500)
        await pilot.pause()
        text = screen_text(app)
        assert "Playground" in text and "the first one is the baseline" in text
        assert "tokens: baseline, bf16, fp16, pure-bf16, ckpt" in text  # the syntax, up front
        # auto follows the one mode rule: no GPU here, so sim at the seed sizes
        assert "r runs the combinations in sim, seed sizes" in text
        seed = screen.workload.sizes["seed"]
        assert screen.query_one("#batch", Input).placeholder == str(seed["batch"])
        # cpu: the small sizes are the placeholders, whole ("4", "64" — not "defa"), no red
        screen.query_one("#mode", Select).value = "cpu"
        await pilot.pause()
        assert screen.query_one("#batch", Input).placeholder == "4"
        assert screen.query_one("#seq", Input).placeholder == "64"
        assert "CPU timings: not the GPU's" in str(screen.query_one("#status").content)
        text = screen_text(app)
        assert not any(w.has_class("-invalid") for w in screen.query(Input))
        # at 80×24 the seq field is on screen, whole
        seq = screen.query_one("#seq", Input).region
        assert seq.right <= 80 and seq.bottom <= 24 and seq.width >= 6
        assert "r Run" in text


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_r_runs_every_combination_and_a_new_workload_clears_the_old_results():
    runner = PlaygroundReplay(RUNS)
    app = make_app(runner)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_playground(pilot)
        screen.query_one("#mode", Select).value = "cpu"  # the replayed runs are cpu, small
        await pilot.pause()
        screen.query_one("#combos", Input).value = "baseline ckpt"
        screen.query_one(DataTable).focus()
        await pilot.press("r")
        await wait_until(pilot, lambda: screen.comparison is not None, tries=1500)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert [TrainConfig.from_dict(r.params["config"]).label for r in runner.requests] == [
            "baseline", "ckpt"]
        table = screen.query_one("#results", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [r[0] for r in rows] == ["baseline", "ckpt"]
        assert rows[0][2] == "12.63 MB" and rows[1][3] == "−1.82 MB (−14%)"
        assert rows[0][4].endswith("ms")  # cpu runs are timed
        plot = screen.query_one("#timelines")
        assert [s.label for s in plot.series] == ["baseline", "ckpt"]
        assert "done: 2 of 2 combinations" in screen_text(app)
        # When the workload changes, the old results go: they were not this workload's
        screen.query_one("#workload", Select).value = "linear"
        await pilot.pause()
        assert table.row_count == 0 and plot.series == [] and screen.comparison is None
        assert screen.query_one("#seq", Input).disabled  # linear has no sequence length


async def test_bad_combinations_are_one_line_and_nothing_runs():
    runner = PlaygroundReplay(RUNS)
    app = make_app(runner)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_playground(pilot)
        screen.query_one("#combos", Input).value = "baseline foo"
        screen.query_one("#combos", Input).focus()
        await pilot.press("enter")
        await pilot.pause()
        status = str(screen.query_one("#status").content)
        assert "cannot run:" in status and "foo" in status
        assert runner.requests == []


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_escape_leaves_the_playground():
    app = make_app(PlaygroundReplay(RUNS))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_playground(pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, PlaygroundScreen)
