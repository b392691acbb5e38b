"""The lab in a real browser: headless Chromium opens `memlab serve`, gives the token and a
name, and drives lesson 01 to its results in cpu mode with keystrokes.

The served terminal is drawn on a canvas, so the test reads the app through the app's own hook
(tests/tui/browser_steps.py, which test_hub.py shares). A screenshot of the results is kept (in
pytest's tmp folder, or in $MEMLAB_BROWSER_SHOTS). Needs Debian's chromium (.ci/run installs it)
and the serve extra.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from browser_steps import run_lesson_01_on_the_cpu, until
from cdp import CHROMIUM, Browser

pytestmark = pytest.mark.slow
pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")

TOKEN = "browser-test-token"
LEARNER = "browser-test"  # sanitised already: the folder name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """`memlab serve` on loopback with a token (so the token-and-cookie path runs too)."""
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
    port, workshop = _free_port(), tmp_path / "workshop"
    env = {**os.environ, "MEMLAB_TEST_STATE": "1", "MEMLAB_HOME": str(tmp_path / "home"),
           "MEMLAB_RUNNER": "direct"}
    proc = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--port", str(port),
                             "--data", str(workshop), "--token", TOKEN],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stdout.read())
            time.sleep(0.1)
    yield port, workshop
    proc.terminate()
    try:
        proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    # the tab's app process ends with its websocket; never leave one behind (the server
    # started it in its own process group)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def _state_file(workshop: Path) -> Path:
    return workshop / "learners" / LEARNER / "test-state.json"


async def test_a_browser_runs_lesson_01_on_the_cpu_beside_the_h200_recording(served, tmp_path):
    port, workshop = served
    shots = Path(os.environ.get("MEMLAB_BROWSER_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    browser = Browser(tmp_path / "chromium-profile")
    await browser.start()
    try:
        # the token once (then a cookie), then a name once
        await browser.goto(f"http://127.0.0.1:{port}/?token={TOKEN}")
        await browser.wait_js("document.getElementById('name') !== null")
        assert "token" not in await browser.js("location.href")
        await browser.js("document.getElementById('name').value = 'Browser Test';"
                         "document.querySelector('form').submit()")
        await browser.wait_js("document.querySelector('.xterm-helper-textarea') !== null")
        path = _state_file(workshop)
        state = await until(path, lambda s: s["screen"] == "HomeScreen", "the course map",
                            timeout=60)
        assert state["served"] and state["learner"] == LEARNER
        state = await run_lesson_01_on_the_cpu(browser, path)
        assert [(r["variant"], r["status"], r["mode"], r["scale"]) for r in state["results"]] \
            == [("baseline", "ok", "cpu", "small"), ("no_grad", "ok", "cpu", "small")]
        assert [(r["variant"], r["mode"], r["device"]) for r in state["beside"]] \
            == [("baseline", "cuda", "NVIDIA H200"), ("no_grad", "cuda", "NVIDIA H200")]
        assert 40_000_000 < state["results"][0]["peak_bytes"] < 50_000_000  # 44.02 MB here
        await asyncio.sleep(1)  # let the canvas catch up with the last frame
        shot = await browser.screenshot(shots / "browser-lesson01-results.png")
        assert shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
    finally:
        await browser.close()
    # the learner's progress is on the server, in their folder
    progress = (workshop / "learners" / LEARNER / "progress.jsonl").read_text()
    assert '"variant":"baseline"' in progress and '"mode":"cpu"' in progress
