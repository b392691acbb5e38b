"""Run → results, cancel, OOM, a crashed worker, keys handled while a run is in flight."""

from __future__ import annotations

import pytest

from textual.widgets import TabbedContent

from lab.course.progress import Progress
from lab.runner.loop import side_by_side
from lab.runner.replay import ReplayRunner
from lab.tui.app import GPU
from lab.tui.screens import HomeScreen, LessonScreen
from lab.tui.widgets import InspectorView, ResultsView

from tui_helpers import (REFERENCE, RUNS, answer_predict_prompt, make_app, notices,
                         open_first_lesson, run_and_wait, text_of, wait_until)

OOM = {"baseline": "linear-baseline/baseline.oom.jsonl"}
CRASH = {"no_grad": "linear-baseline/baseline.crash.jsonl"}


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~4 CPU-s (Textual's layout)
async def test_run_shows_results_for_every_variant(memlab_home):
    runner = ReplayRunner(RUNS)
    app = make_app(runner)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        await run_and_wait(pilot)
        # every variant was asked for, in order, at the default seed scale, simulated (no CUDA)
        assert [(r.variant, r.mode, r.scale) for r in runner.requests] == [
            ("baseline", "sim", "seed"), ("no_grad", "sim", "seed")]
        assert [r.status for r in screen.results] == ["ok", "ok"]
        assert screen.query_one(TabbedContent).active == "results"
        summary = text_of(screen, "#summary")
        assert "4.40 GB" in summary and "4.20 GB" in summary
        # Δ vs baseline, in the unit that reads best, rounded as `memlab run` rounds it
        assert "−200.00 MB (−4.5%)" in summary
        assert "Peak per variant — simulated (seed)" in summary  # where the numbers came from
        assert "none (sim)" in summary  # no step time in sim, said so
        checks = text_of(screen, "#checks")
        assert "2.00 GB" in checks and "match" in checks
        bars = text_of(screen, "#bars")
        assert "parameters" in bars and "activations" in bars
    # the run is in the history on disk
    history = Progress.load().history_for("linear-baseline")
    assert [(h.variant, h.status, h.peak_bytes) for h in history] == [
        ("baseline", "ok", 4400200000), ("no_grad", "ok", 4200200000)]


@pytest.mark.slow  # a run, then the inspector driven key by key (~5 s on 2 cores)
async def test_inspector_cursor_keys_mouse_and_live_blocks():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        await run_and_wait(pilot)
        await pilot.press("4")
        inspector = screen.query_one(InspectorView)
        assert inspector.variant == "baseline" and inspector.index == 5  # opens at the peak
        info = text_of(screen, "#cursor-info")
        assert "live 4.40 GB" in info and "the peak" in info and "forward 1" in info
        table = screen.query_one("#blocks")
        assert table.row_count == 6  # weights, bias, two outputs, two inputs
        assert "experiment.py:25 baseline" in str(table.get_row_at(0)[4])
        await pilot.press("left", "left")
        assert inspector.index == 3
        assert "live 3.20 GB" in text_of(screen, "#cursor-info")
        assert table.row_count == 4  # the second input and output are not born yet
        await pilot.press("end")
        assert inspector.index == 15 and table.row_count == 0  # everything freed
        await pilot.press("m")
        assert inspector.index == 5
        await pilot.press("v")
        await pilot.pause()
        assert inspector.variant == "no_grad" and inspector.index == 6  # its own peak
        # a click on the plot puts the cursor under the mouse
        plot = screen.query_one("#inspector-plot")
        left, right = plot._frame
        await pilot.click("#inspector-plot", offset=(left + 1, plot.size.height // 2))
        await pilot.pause()
        assert inspector.index == 0
        await pilot.click("#inspector-plot", offset=(right - 1, plot.size.height // 2))
        await pilot.pause()
        assert inspector.index == 15


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_run_at_small_scale_in_cpu_mode_passes_the_controls():
    runner = ReplayRunner(RUNS)
    app = make_app(runner)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        screen.query_one("#scale").value = "small"
        screen.query_one("#mode").value = "cpu"
        screen.query_one("#v-no_grad").value = False
        await pilot.pause()
        await run_and_wait(pilot)
        assert [(r.variant, r.mode, r.scale) for r in runner.requests] == [("baseline", "cpu", "small")]
        # the screen says which mode and scale made the numbers (the replayed result is the
        # fixture's, so this reads what the screen shows, not what the runner was asked)
        summary = text_of(screen, "#summary")
        assert "Peak per variant — your CPU (small)" in summary
        assert "44.02 MB" in summary  # small scale, in MB
        assert "ms" in summary  # a real step time in cpu mode


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_virtual_gpu_size_is_passed_and_bad_sizes_are_refused():
    runner = ReplayRunner(RUNS, overrides=OOM)
    app = make_app(runner)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        screen.query_one("#gpu-memory").value = "lots"
        await pilot.press("r")
        await answer_predict_prompt(pilot, None)  # refused before anything runs
        assert runner.requests == [] and screen.results == [] and not screen.running
        assert any("Virtual GPU size 'lots' is not a size such as" in n.message
                   for n in notices(app))
        screen.query_one("#gpu-memory").value = "30MB"
        screen.query_one("#v-no_grad").value = False
        await run_and_wait(pilot)
        assert [r.gpu_memory for r in runner.requests] == [30_000_000]
        assert screen.results[0].status == "oom"


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_cancel_stops_the_run_and_the_app_keeps_working():
    runner = ReplayRunner(RUNS, hold=True, hold_timeout_s=600)  # until cancelled, however loaded
    app = make_app(runner)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        await pilot.press("r")
        await answer_predict_prompt(pilot, None)
        await wait_until(pilot, runner.holding.is_set)  # certainly in flight
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not screen.running)
        # the variants in flight are cancelled (sim runs them side by side, one per core:
        # lab.runner.loop.side_by_side) and no other starts
        in_flight = min(side_by_side(runner.requests[0].mode), 2)
        assert [(r.variant, r.status) for r in screen.results] == [
            ("baseline", "cancelled"), ("no_grad", "cancelled")][:in_flight]
        assert len(runner.requests) == in_flight
        assert "Cancelled" in text_of(screen, "#status-text")
        title = screen.query_one("#timeline").title
        assert "stopped before a peak was measured" in title and "peak 0" not in title
        assert isinstance(app.screen, LessonScreen)  # Esc cancelled; it did not leave
        # and a new run works
        runner.hold = False
        await run_and_wait(pilot)
        assert [r.status for r in screen.results] == ["ok", "ok"]


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_oom_is_shown_as_a_lesson_moment():
    app = make_app(overrides=OOM)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        await run_and_wait(pilot)
        oom = screen.results[0]
        assert oom.status == "oom"
        box = text_of(screen, "#failures")
        assert "Out of memory" in box and "This is a result, not a bug" in box
        # the real message, unedited: a sentence a line, in a block that scrolls (URL whole)
        assert "CUDA out of memory.\nTried to allocate" in box
        summary = text_of(screen, "#summary")
        assert "OOM" in summary
        assert "OOM after" in summary and "0 B" not in summary  # where it stopped; it needed more
        checks = text_of(screen, "#checks")
        assert "not reached" in checks  # the output was never allocated
        assert "×nan" not in checks and " 0 B" not in checks
        assert screen.query_one(ResultsView).query_one("#timeline").display
        assert any("out of memory" in n.message for n in notices(app))


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_crashed_worker_is_an_error_and_the_app_keeps_working():
    runner = ReplayRunner(RUNS, overrides=CRASH)
    app = make_app(runner)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        await run_and_wait(pilot)
        assert [r.status for r in screen.results] == ["ok", "error"]
        box = text_of(screen, "#failures")
        assert "no_grad failed" in box and "exited with code -11" in box
        assert any(n.severity == "error" for n in notices(app))
        # the app still works: run again without the crash, go home
        runner.overrides.clear()
        await run_and_wait(pilot)
        assert [r.status for r in screen.results] == ["ok", "ok"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        assert "run" in str(app.screen.query_one("#lessons").get_row_at(0)[1])


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_a_runner_that_raises_is_reported_not_fatal():
    class Broken:
        def run(self, req, on_event=None, cancel=None):
            raise RuntimeError("boom")

    app = make_app(Broken())
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        await run_and_wait(pilot)
        assert [r.status for r in app.screen.results] == ["error", "error"]
        assert "the runner failed: RuntimeError: boom" in text_of(app.screen, "#failures")


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_with_a_gpu_your_run_leads_and_the_h200_sits_beside_it():
    gpu = type("Gpu", (), {"name": "NVIDIA H200", "total_bytes": 150_117_679_104})()
    runner = ReplayRunner(RUNS)
    app = make_app(runner, references=REFERENCE, gpu=gpu)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        assert "Run it yourself" not in text_of(screen, "#status-text")
        runner_mode = app.resolve_mode("auto", "seed", screen.lesson)
        assert runner_mode == "cuda"
        # the replay fixture has no cuda recording: point both variants at the sim ones
        runner.overrides.update({v: f"linear-baseline/{v}.sim-seed.jsonl"
                                 for v in ("baseline", "no_grad")})
        await run_and_wait(pilot)
        assert [r.mode for r in runner.requests] == ["cuda", "cuda"]  # your GPU ran it
        assert screen.lead.how == "live"
        note = text_of(screen, "#beside-note")
        assert "Beside it: Recorded on a TEST FIXTURE" in note
        # the difference first: your run against the recording, above your run's timeline
        first = text_of(screen, "#first")
        assert "simulated (seed) vs H200 recording: the peaks" in first or \
            "vs TEST FIXTURE" in first, first
        assert not screen.query_one("#beside-table").display
        assert screen.query_one("#beside").display


async def test_no_reference_without_cuda_is_said_plainly_and_none_with_cuda():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert "no GPU recordings in this install" in text_of(app.screen, "#banner")
    app = make_app(references=REFERENCE)
    app.gpu = type("Gpu", (), {"name": "NVIDIA H200", "total_bytes": 150_117_679_104})()
    app._detect = False
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.device_state = GPU
        await pilot.pause()
        assert "NVIDIA H200 · 150.12 GB (139.81 GiB) · real CUDA runs" in text_of(app.screen,
                                                                                "#banner")


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_keys_are_handled_while_a_run_is_in_flight():
    # Given a run held in flight (the replay waits before its result), when the learner
    # switches tabs and presses ?, then each key is handled at once (the tab changes, help
    # opens and closes) and the run is still running: the UI never waits for the run. How late
    # the event loop wakes up during a run is a figure: bench/ui_stall.py prints it.
    # (Held until the test cancels it: a 10 s hold ran out on a loaded 2-core box.)
    runner = ReplayRunner(RUNS, hold=True, hold_timeout_s=600)
    app = make_app(runner)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        app.progress.commit_prediction(screen.lesson.id, 4.4)  # r runs at once, no prompt
        await pilot.press("r")
        await wait_until(pilot, runner.holding.is_set)
        tabs = screen.query_one(TabbedContent)
        assert tabs.active == "results" and screen.running
        await pilot.press("1")
        await pilot.pause()
        assert tabs.active == "text" and screen.running
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and screen.running
        await pilot.press("escape")  # cancels the held run
        await wait_until(pilot, lambda: not screen.running)
        await app.workers.wait_for_complete()
