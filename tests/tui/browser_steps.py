"""What a learner does in the browser with lesson 01, step by step, for the browser tests
(`memlab serve`: test_browser.py; behind JupyterHub: test_hub.py).

The served terminal is drawn on a canvas, so the app is read through its own hook: with
MEMLAB_TEST_STATE=1 it writes `test-state.json` in the learner's data folder whenever what is
on screen changes; `read_state` reads that file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path


def read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


async def until(path: Path, check, what: str, timeout: float = 30) -> dict:
    seen = []  # the distinct states on the way, for the failure message
    for _ in range(int(timeout * 10)):
        state = read_state(path)
        if state and check(state):
            return state
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        await asyncio.sleep(0.1)
    trail = "\n".join(json.dumps({k: v for k, v in st.items() if k not in ("learner", "served")})
                      for st in seen[-8:])
    raise AssertionError(f"the app never showed {what}; states on the way:\n{trail}")


async def run_lesson_01_on_the_cpu(browser, path: Path, timeout: float = 150) -> dict:
    """From the course map: open lesson 01, pick the small scale, run it here (`y`), predict
    when asked; the app's state once both variants ran on this machine."""
    await browser.js("document.querySelector('.xterm-helper-textarea').focus()")
    await browser.press("enter")  # lesson 01, the first row of the course map
    await until(path, lambda s: s["lesson"] == "linear-baseline", "lesson 01")
    # the new screen focuses its text once it is up (Textual's auto focus, after a refresh): a
    # key before that lands first, and the late focus brings the text's tab back (seen once on
    # a loaded CI box: "2" showed the experiment, then the text tab came back with its focus)
    await until(path, lambda s: s["focus"] == "text-scroll", "the lesson's text, focused")
    # the experiment's controls: small scale, so auto picks a real CPU run
    await browser.press("2")
    # the tab lets the focus go, then focuses its code: wait for that, or the first Tab below
    # is still on its way when that focus counts as the focus moving (then one Tab too many)
    await until(path, lambda s: s["tab"] == "experiment" and s["focus_type"] is not None,
                "the experiment tab, focused")
    for _ in range(20):  # Tab to the scale selector
        if read_state(path).get("focus") == "scale":
            break
        where = lambda s: (s.get("focus"), s.get("focus_type"))  # noqa: E731 (ids may be None)
        before = where(read_state(path))
        await browser.press("tab")
        await until(path, lambda s: where(s) != before, "the focus moving")
    assert read_state(path).get("focus") == "scale"
    await browser.press("enter")  # open its list, then the second entry
    await until(path, lambda s: s["focus_type"] == "SelectOverlay", "the scale list")
    await browser.press("down")
    await asyncio.sleep(0.3)
    await browser.press("enter")
    await until(path, lambda s: s["scale"] == "small", "small scale")
    # y: "run it yourself" (r would play the H200 recording: no CUDA here)
    started = lambda s: s["screen"] == "PredictScreen" or s["running"]  # noqa: E731
    await browser.press("y")
    state = await until(path, started, "a run starting on y")
    if state["screen"] == "PredictScreen":  # the app asks for a prediction first
        await browser.press("4")
        await browser.press("enter")
    # after y the learner's own run leads and the H200 recording sits beside it
    mine = lambda s: [r for r in s.get("results", []) if r["mode"] == "cpu"]  # noqa: E731
    return await until(path, lambda s: len(mine(s)) == 2 and not s["running"],
                       "this machine's run beside the recording", timeout=timeout)
