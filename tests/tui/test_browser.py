"""The lab in a real browser: headless Chromium opens `memlab serve`, gives the token and a
name, and drives lesson 01 to its results in cpu mode with keystrokes.

The served terminal is drawn on a canvas, so the test reads the app through the app's own hook:
with MEMLAB_TEST_STATE=1 the app writes `test-state.json` in the learner's data folder whenever
what is on screen changes. A screenshot of the results is kept (in pytest's tmp folder, or in
$MEMLAB_BROWSER_SHOTS). Needs Debian's chromium (.ci/run installs it) and the serve extra.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def _state(workshop: Path) -> dict:
    path = workshop / "learners" / LEARNER / "test-state.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


async def _until(workshop, check, what: str, timeout: float = 30) -> dict:
    seen = []  # the distinct states on the way, for the failure message
    for _ in range(int(timeout * 10)):
        state = _state(workshop)
        if state and check(state):
            return state
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        await asyncio.sleep(0.1)
    trail = "\n".join(json.dumps({k: v for k, v in st.items() if k not in ("learner", "served")})
                      for st in seen[-8:])
    raise AssertionError(f"the app never showed {what}; states on the way:\n{trail}")


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
        state = await _until(workshop, lambda s: s["screen"] == "HomeScreen", "the course map",
                             timeout=60)
        assert state["served"] and state["learner"] == LEARNER
        await browser.js("document.querySelector('.xterm-helper-textarea').focus()")
        # lesson 01 (the first row of the course map)
        await browser.press("enter")
        await _until(workshop, lambda s: s["lesson"] == "linear-baseline", "lesson 01")
        # the experiment's controls: small scale, so auto picks a real CPU run
        await browser.press("2")
        await _until(workshop, lambda s: s["tab"] == "experiment", "the experiment tab")
        for _ in range(20):  # Tab to the scale selector
            if _state(workshop).get("focus") == "scale":
                break
            where = lambda s: (s.get("focus"), s.get("focus_type"))  # noqa: E731 (ids may be None)
            before = where(_state(workshop))
            await browser.press("tab")
            await _until(workshop, lambda s: where(s) != before, "the focus moving")
        assert _state(workshop).get("focus") == "scale"
        await browser.press("enter")  # open its list, then the second entry
        await _until(workshop, lambda s: s["focus_type"] == "SelectOverlay", "the scale list")
        await browser.press("down")
        await asyncio.sleep(0.3)
        await browser.press("enter")
        await _until(workshop, lambda s: s["scale"] == "small", "small scale")
        # y: "run it yourself" (r would play the H200 recording: no CUDA here)
        started = lambda s: s["screen"] == "PredictScreen" or s["running"]  # noqa: E731
        await browser.press("y")
        state = await _until(workshop, started, "a run starting on y")
        if state["screen"] == "PredictScreen":  # the app asks for a prediction first
            for key in "4":
                await browser.press(key)
            await browser.press("enter")
        # after y the learner's own run leads and the H200 recording sits beside it
        mine = lambda s: [r for r in s.get("results", []) if r["mode"] == "cpu"]  # noqa: E731
        state = await _until(workshop, lambda s: len(mine(s)) == 2 and not s["running"],
                             "this machine's run beside the recording", timeout=150)
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
