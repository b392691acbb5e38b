"""A tab of `memlab serve` names files only inside its learner's folder (issue 34, defect 1): the
palette's "Diff two runs" with `/dev/zero /dev/zero` grew a served tab from 1.2 to 3.7 GB in
1.5 s, and any file of the server opened. Every path goes through lab/serve/policy.py, and
every read through lab/user_files.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from textual.widgets import Input

from lab.tui.screens.diff_view import DiffViewScreen

from tui_helpers import make_app, notices, wait_until

REF = Path(__file__).resolve().parents[2] / "assets" / "reference" / "mixed-precision"


async def _diff(app, pilot, text: str) -> None:
    [cmd] = [c for c in app.get_system_commands(app.screen) if c.title == "Diff two runs"]
    cmd.callback()
    await pilot.pause()
    app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_a_served_tab_diffs_only_files_in_its_learners_folder(memlab_home, monkeypatch):
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    memlab_home.mkdir(parents=True, exist_ok=True)
    for name in ("baseline.json", "bf16.json"):
        shutil.copy(REF / name, memlab_home / name)
    os.mkfifo(memlab_home / "pipe.json")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        # outside the folder (tests/unit/test_serve.py: the policy's every case)
        await _diff(app, pilot, "/dev/zero /dev/zero")
        assert not isinstance(app.screen, DiffViewScreen)
        assert "opens files only inside your data folder" in str(notices(app)[-1].message)
        # inside the folder, but a FIFO: one line, nothing hangs
        await _diff(app, pilot, "pipe.json baseline.json")
        assert "FIFO" in str(notices(app)[-1].message)
        # the learner's own files (relative to their folder) open as anywhere
        await _diff(app, pilot, "baseline.json bf16.json")
        await wait_until(pilot, lambda: isinstance(app.screen, DiffViewScreen), tries=500)
