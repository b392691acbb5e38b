"""The challenge screen: x opens it, s copies the starting code, c grades the copy in sim through
the app's runner (a fake here) and the course map counts the pass; a served lab says why
challenges are off and offers nothing to press."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from lab.course import challenges as chl
from lab.measure.result import AllocatorStats, Block, DeviceInfo, Peak, RunResult
from lab.tui.screens.challenges import ChallengeScreen

from tui_helpers import COURSE, make_app, screen_text, wait_until


class Passing:
    """Every check's run finished under the cap with every tensor its size, as the tracker and
    the allocator model measured it (a grade never reads what the code reports itself)."""

    def run(self, req, on_event=None, cancel=None):
        big, small = 2_147_483_648, 104_857_600
        return RunResult(lesson="memory-budget", variant="challenge", mode="sim", scale="seed",
                         device=DeviceInfo("simulated", "sim"), peak=Peak(bytes=big + small),
                         blocks=[Block(big, "activations", "big buffer again", 3, 4),
                                 Block(small, "activations", "small tensor kept", 2, 5)],
                         allocator=AllocatorStats(peak_reserved_bytes=2_264_924_160))


@pytest.mark.slow  # a pilot session: seconds
async def test_start_then_check_a_challenge_and_the_map_counts_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    app = make_app(Passing())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("x")
        assert isinstance(app.screen, ChallengeScreen)
        text = screen_text(app)
        assert "fit-16gib" in text and "fragmentation" in text and "not started" in text
        await pilot.press("down", "down", "s")  # fragmentation: copy its starting code
        ch = chl.find(COURSE, "fragmentation")
        assert chl.copy_path(ch).is_file() and chl.copy_path(ch).is_relative_to(tmp_path)
        screen = app.screen
        await pilot.press("c")
        await wait_until(pilot, lambda: "fragmentation" in screen.grades, tries=1500)
        assert screen.grades["fragmentation"].passed and chl.passed(app.progress, ch)
        await pilot.pause()
        assert "✔ passed" in screen_text(app)
        # the grade is in sight at 80x24, under the challenge's title, not below its brief
        assert "PASSED" in screen_text(app) and "✔ largest" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        row = app.screen.query_one("#lessons", DataTable).get_row("memory-budget")
        assert "challenges 1/3" in str(row[-1])  # on the course map, after the lesson's title


@pytest.mark.slow
async def test_a_served_lab_says_why_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    app = make_app(Passing())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(ChallengeScreen())
        await pilot.pause()
        await pilot.press("s", "c")
        await pilot.pause()
        assert "learners' code is not run on the server" in screen_text(app).replace("\n", " ")
        assert not (tmp_path / "challenges").exists()
