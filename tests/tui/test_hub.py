"""The lab inside a real JupyterHub (issue 39): `jupyterhub` from PyPI, configurable-http-proxy
from npm, the dummy authenticator and the local process spawner, configured by the block of
docs/WORKSHOPS.md an instructor copies; everything on loopback (bench/hub_load.py is the
harness, and measures 10 learners).

One learner logs in with headless Chromium, lands on the lab behind the hub's prefix
(`/user/ada/memlab/`) and runs lesson 01 on the CPU; two more learners open their labs through
the hub's proxy and predict and play lesson 01 over the lab's websocket; the instructor, over
HTTP, logs in to the class service with the hub's OAuth and sees the three of them, pushes a
run and moves the class (each learner's lab shows it); a learner stops their server and their
lab ends with it. What must be refused is refused: one learner's lab opened by another,
progress reported under another's name, a push by a learner, the class page for a learner.
One test, so the hub starts once per run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from browser_steps import run_lesson_01_on_the_cpu, until
from cdp import CHROMIUM, Browser

pytestmark = pytest.mark.slow
for module in ("jupyterhub", "jupyter_server_proxy", "textual_serve"):
    pytest.importorskip(module, reason="the hub extra: pip install 'memlab[hub]'")
if not Path("/proc/self/environ").exists():
    pytest.skip("finds the hub's processes through /proc (Linux)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
SCOPE = "access:services!service=memlab-class"


def _harness():
    spec = importlib.util.spec_from_file_location("hub_load", ROOT / "bench" / "hub_load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["hub_load"] = module
    spec.loader.exec_module(module)
    return module


async def _api(user, method: str, path: str, token: str | None, **kw) -> tuple[int, dict]:
    """A request to the class service's API with `token` (no browser cookies: a new session)."""
    import aiohttp

    headers = {"Authorization": f"token {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, f"{user.hub.class_url}{path}", headers=headers,
                                   **kw) as resp:
            return resp.status, await resp.json(content_type=None)


def _push_with_the_cli(hub, token: str, lesson: str) -> subprocess.CompletedProcess:
    """`memlab class push 01 --hub` as an instructor types it in their hub server's terminal
    (the H200 recording as the run: no GPU here)."""
    env = {**os.environ, "MEMLAB_CLASS_URL": hub.class_url, "JUPYTERHUB_API_TOKEN": token,
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "lab", "class", "push", "01", "--hub",
                           "--results", str(ROOT / "assets" / "reference" / lesson)],
                          capture_output=True, text=True, env=env, timeout=120)


async def test_the_lab_in_a_real_jupyterhub(tmp_path):
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        pytest.fail(f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
    H = _harness()
    if not shutil.which("configurable-http-proxy"):
        pytest.fail("no configurable-http-proxy: .ci/run installs it (npm install -g "
                    "configurable-http-proxy)")
    # the hub's configuration sets every lab's served limits (the launcher reads them)
    hub = H.Hub(tmp_path / "hub", instructors=["teacher"],
                learner_env={"MEMLAB_HUB_LIMITS": "--max-tabs 2 --max-size-factor 2"})
    browser = Browser(tmp_path / "chromium-profile")
    users = {name: H.HubUser(hub, name) for name in ("ada", "bob", "carol", "teacher")}
    try:
        await asyncio.gather(hub.start(), browser.start())
        # the learners' servers start together, as a class arriving
        await asyncio.gather(*(hub.start_server(n) for n in ("ada", "bob", "carol")))
        await asyncio.gather(*(user.login() for user in users.values()))
        bob, carol, teacher = users["bob"], users["carol"], users["teacher"]

        # the launcher entry, in the server-proxy's listing that JupyterLab's launcher reads
        status, _, text = await bob.get("/user/bob/server-proxy/servers-info")
        entries = {e["name"]: e for e in json.loads(text)["server_processes"]}
        assert status == 200 and entries["memlab"]["launcher_entry"]["title"] == "GPU Memory Lab"
        status, _, icon = await bob.get(entries["memlab"]["launcher_entry"]["icon_url"])
        assert status == 200 and "<svg" in icon

        # ada, in Chromium: the hub's login page, then her server's default page is the lab
        await browser.goto(f"{hub.url}/hub/login")
        await browser.wait_js("document.readyState === 'complete' && "
                              "document.getElementById('login_submit') !== null")
        await browser.js("document.getElementById('username_input').value = 'ada';"
                         f"document.getElementById('password_input').value = '{H.PASSWORD}';"
                         "document.getElementById('login_submit').click()")
        await browser.wait_js("document.querySelector('.xterm-helper-textarea') !== null", 90)
        assert await browser.js("location.pathname") == "/user/ada/memlab/"
        ada_state = hub.memlab_home("ada") / "test-state.json"

        async def ada_runs_lesson_01():
            state = await until(ada_state, lambda s: s["screen"] == "HomeScreen",
                                "the course map", timeout=60)
            assert state["served"] and state["learner"] == "ada"
            return await run_lesson_01_on_the_cpu(browser, ada_state)

        async def plays(user):
            status, url, page = await user.open_lab()
            assert status == 200 and "textual.js" in page, (status, url)
            await user.connect()
            return await user.predict_and_play(120)

        # bob and carol, over HTTP and the lab's websocket, while ada runs hers
        ada, *others = await asyncio.gather(ada_runs_lesson_01(), plays(bob), plays(carol))
        assert [(r["variant"], r["status"], r["mode"], r["scale"]) for r in ada["results"]] \
            == [("baseline", "ok", "cpu", "small"), ("no_grad", "ok", "cpu", "small")]
        assert all(s["results"] and s["results"][0]["device"] == "NVIDIA H200" for s in others)
        ada_home = f"MEMLAB_HOME={hub.memlab_home('ada')}".encode()
        tab_limits = [json.loads(v.split(b"=", 1)[1]) for pid in H.processes_of(hub.work)
                      if ada_home in (env := H._environ(pid))
                      for v in env if v.startswith(b"MEMLAB_TAB_LIMITS=")]
        assert tab_limits and all(t["max_tabs"] == 2 and t["size_factor"] == 2
                                  for t in tab_limits)
        await asyncio.sleep(1)  # let the canvas catch up with the last frame
        shots = Path(os.environ.get("MEMLAB_BROWSER_SHOTS") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        print(f"screenshot: {await browser.screenshot(shots / 'hub-lesson01-results.png')}")

        # the instructor's class view (the hub's OAuth, then the service's page): three rows
        for _ in range(100):  # each lab server reports within a sync tick (3 s)
            rows = await H.class_rows(teacher)
            if len(rows) == 3:
                break
            await asyncio.sleep(0.3)
        assert sorted(rows) == ["ada", "bob", "carol"]
        status, url, page = await teacher.get("/services/memlab-class/")
        assert status == 200 and url.endswith("/services/memlab-class/")
        assert "Signed in as teacher" in page and "Lesson 01" in page

        # refused: another learner's lab (the hub), the class page for a learner (the service)
        status, url, _ = await bob.open_lab("carol")
        assert status == 403 and "/user/carol/memlab" not in url
        status, _, page = await bob.get("/services/memlab-class/")
        assert status == 403 and "for instructors" in page
        # refused: reporting as another user, pushing as a learner, no token, a made-up one
        bob_token = await hub.token("bob", [SCOPE])
        progress = hub.memlab_home("bob").joinpath("progress.jsonl").read_bytes()
        status, body = await _api(bob, "PUT", "api/learners/carol/progress", bob_token,
                                  data=progress)
        assert status == 403 and "only their own progress" in body["error"]
        status, body = await _api(bob, "PUT", "api/learners/bob/progress", bob_token,
                                  data=progress)
        assert status == 200 and body["folder"] == "bob"  # the same token, as himself
        status, body = await _api(bob, "POST", "api/goto", bob_token, json={"lesson": "02"})
        assert status == 403 and "only instructors" in body["error"]
        assert (await _api(bob, "GET", "api/class", None))[0] == 401
        assert (await _api(bob, "GET", "api/class", "not-a-hub-token"))[0] == 403

        # carol leaves (her "Stop My Server"): her lab and its tab end with her server, while
        # the instructor pushes lesson 01's run with the CLI: bob, who predicted it, sees it
        carol_left = asyncio.create_task(hub.stop_server("carol"))
        teacher_token = await hub.token("teacher", [SCOPE])
        done = await asyncio.to_thread(_push_with_the_cli, hub, teacher_token,
                                       "linear-baseline")
        assert done.returncode == 0, done.stderr
        label = "run by your instructor on NVIDIA H200"
        await bob.until(lambda s: s.get("class_run") == label, "the instructor's run", 30)
        # ... and moves the class to lesson 02: bob's lab opens it
        status, body = await _api(teacher, "POST", "api/goto", teacher_token,
                                  json={"lesson": "02"})
        assert status == 200
        await bob.until(lambda s: s["lesson"] == body["lesson"], "lesson 02", 30)
        assert await carol_left == [], "processes that outlived carol's server"
    finally:
        await browser.close()
        for user in users.values():
            await user.close()
        hub.stop(graceful=False)
    # nothing of the hub outlives the test (configurable-http-proxy neither)
    assert not H.processes_of(hub.work)
