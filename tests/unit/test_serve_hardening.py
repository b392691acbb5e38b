"""Issue 34, the server's half: what a security test of `memlab serve` on loopback found; every
test here failed before the fix.

1 a served tab read any file on the server (the palette's "Diff two runs": policy.allowed_path
  was called nowhere) -> tests/tui/test_served_paths.py, and the policy here
2 the token leaked: a cookie `¹.a.b` gave a 500 whose logged traceback held it; the access log
  wrote `?token=` on every line (test_serve.py runs the real server for it); MEMLAB_SERVE_TOKEN
  reached every tab's environment
3 one learner's cookie opened 40 tabs; the playground ran cpu mode at batch 100,000
6 no X-Frame-Options / CSP frame-ancestors; a post without Origin was accepted whatever its
  Sec-Fetch-Site or Referer said; names in other alphabets (李雷, Иван) were refused
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.runner.protocol import RunRequest
from lab.serve.limits import LIMITS_ENV, LimitedRunner, TabLimits

aiohttp = pytest.importorskip("aiohttp", reason="the serve extra: pip install 'memlab[serve]'")
pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from lab.serve.server import LabServer  # noqa: E402

TOKEN = "issue34-token"
PLAYGROUND = dict(lesson="playground", variant="run", kind="experiment", experiment="generic.py")


async def _client(root: Path, token: str | None = TOKEN, **kw):
    server = LabServer(root, "0.0.0.0" if token else "127.0.0.1", 8000, token,
                       say=lambda text: None, **kw)
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    if token:
        await client.get(f"/?token={token}")  # the session cookie
    return server, client


# ---- 2: the token never leaks ------------------------------------------------------------------
@pytest.mark.parametrize("cookie", ["¹.a.b", "٣٣.a.b", "9" * 5000 + ".a.b", "..", "1.2.3.4"])
async def test_a_session_cookie_that_breaks_a_parser_is_403_not_500(tmp_path, cookie):
    _, client = await _client(tmp_path)
    try:
        client.session.cookie_jar.clear()
        resp = await client.get("/", headers={"Cookie": f"memlab_session={cookie}"})
        assert resp.status == 403  # was 500, and the traceback (with locals) held the token
    finally:
        await client.close()


def test_no_tab_inherits_the_token_and_every_tab_gets_its_limits(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_SERVE_TOKEN", TOKEN)
    server = LabServer(tmp_path, say=lambda text: None, limits=TabLimits(2, ("sim",), 2.0))
    server.command = (f"{sys.executable} -c \"import os; "
                      f"print(os.environ.get('MEMLAB_SERVE_TOKEN'), os.environ['{LIMITS_ENV}'])\"")
    out = subprocess.run(["sh", "-c", server.tab_command("ada")], capture_output=True,
                         text=True, env=os.environ).stdout
    assert out.split(" ", 1)[0] == "None" and TOKEN not in out
    assert TabLimits.from_env({LIMITS_ENV: out.split(" ", 1)[1]}) == TabLimits(2, ("sim",), 2.0)


# the token printed once and never logged: tests/unit/test_serve.py
# (test_memlab_serve_on_every_address_refuses_what_lacks_the_token runs the real server)


# ---- 6: headers, cross-site posts ------------------------------------------------------------------
async def test_no_other_site_may_frame_the_lab(tmp_path):
    _, client = await _client(tmp_path)
    try:
        for path in ("/", "/static/js/textual.js", "/learner"):
            resp = await client.get(path)
            assert resp.headers["X-Frame-Options"] == "DENY", path
            assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"], path
        client.session.cookie_jar.clear()
        refused = await client.get("/")
        assert refused.status == 403 and refused.headers["X-Frame-Options"] == "DENY"
    finally:
        await client.close()


@pytest.mark.parametrize("headers, status", [
    ({"Sec-Fetch-Site": "cross-site"}, 403), ({"Sec-Fetch-Site": "same-site"}, 403),
    ({"Referer": "http://evil.example/page"}, 403), ({"Referer": "null"}, 403),
    ({"Sec-Fetch-Site": "same-origin"}, 303), ({"Sec-Fetch-Site": "none"}, 303),
    ({"Referer": "http://127.0.0.1:{port}/learner"}, 303),
    ({}, 303),  # no browser sent it (a browser sends Origin or Sec-Fetch-Site on a post)
])
async def test_a_post_without_origin_is_judged_by_sec_fetch_site_then_referer(tmp_path, headers,
                                                                              status):
    _, client = await _client(tmp_path, token=None)
    try:
        port = client.server.port
        headers = {k: v.format(port=port) for k, v in headers.items()}
        resp = await client.post("/learner", data={"name": "eve"}, headers=headers,
                                 allow_redirects=False)
        assert resp.status == status
    finally:
        await client.close()
    assert (tmp_path / "learners" / "eve").exists() == (status == 303)


@pytest.mark.parametrize("name, folder", [("李雷", "李雷"), ("Иван", "иван"),
                                          ("Zoë Martin", "zoe-martin")])
async def test_a_name_in_any_alphabet_signs_in_and_its_cookie_brings_it_back(tmp_path, name,
                                                                            folder):
    server, client = await _client(tmp_path)
    try:
        resp = await client.post("/learner", data={"name": name}, allow_redirects=False)
        assert resp.status == 303  # refused outright before
        page = await (await client.get("/")).text()
        assert "/ws" in page  # the terminal page: the cookie names the learner
        assert (tmp_path / "learners" / folder).is_dir()
        cookie = client.session.cookie_jar.filter_cookies(client.make_url("/"))["memlab_learner"]
        assert cookie.value.isascii() and server.identity.learner_of(cookie.value) == folder
    finally:
        await client.close()


# ---- 3: tabs per learner ---------------------------------------------------------------------------
async def test_a_learner_opens_at_most_max_tabs_and_the_next_one_says_why(tmp_path):
    server, client = await _client(tmp_path, limits=TabLimits(max_tabs=2))
    server.command = "sleep 30"  # a tab's process: nothing to run here but a placeholder
    try:
        await client.post("/learner", data={"name": "ada"})
        tabs = [await client.ws_connect("/ws?width=80&height=24") for _ in range(2)]
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await client.ws_connect("/ws?width=80&height=24")
        assert e.value.status == 403  # one cookie opened 40 before
        page = await client.get("/")
        text = await page.text()
        assert page.status == 429 and "2 tabs of the lab open" in text and "--max-tabs" in text
        await tabs[0].close()
        for _ in range(100):  # the server counts the closed one out
            if server.open_tabs["ada"] < 2:
                break
            await __import__("asyncio").sleep(0.05)
        again = await client.ws_connect("/ws?width=80&height=24")
        await again.close()
        await tabs[1].close()
    finally:
        await client.close()


# ---- 3: the work a tab may start ---------------------------------------------------------------------
class Runner:
    def __init__(self):
        self.asked = []

    def run(self, req, on_event=None, cancel=None):
        self.asked.append(req)
        return "ran"


@pytest.mark.parametrize("req, says, flag", [
    (RunRequest(mode="cpu", scale="small",
                params={"workload": "mlp", "batch": 100_000, "seq": 64}, **PLAYGROUND),
     "batch 100,000 is more than a browser tab may run here, at most 16 (4 × mlp's 4 at small",
     "--max-size-factor"),
    (RunRequest(mode="sim", scale="seed",
                params={"workload": "gpt2-small", "batch": 8, "seq": 10**6}, **PLAYGROUND),
     "seq 1,000,000 is more than", "--max-size-factor"),
    (RunRequest("training-cycle", "baseline", "cpu", "seed"),
     "cpu at seed scale would run the full-size model", None),
    (RunRequest("linear-baseline", "baseline", "cuda", "seed"), "cuda runs are off", "--tab-modes"),
])
def test_a_tab_runs_only_what_its_limits_allow_and_says_which(req, says, flag):
    runner = Runner()
    res = LimitedRunner(runner, TabLimits(modes=("sim", "cpu"))).run(req)
    # the refusal is the run's result: the tab shows it where the result would be
    assert res.status == "error" and says in res.error
    assert flag is None or f"memlab serve {flag}" in res.error  # and who sets the limit
    assert runner.asked == []  # refused before the runner


def test_within_its_limits_a_run_goes_through():
    runner = Runner()
    limited = LimitedRunner(runner, TabLimits())
    for req in (RunRequest(mode="cpu", scale="small",
                           params={"workload": "mlp", "batch": 16, "seq": 256}, **PLAYGROUND),
                RunRequest("linear-baseline", "baseline", "cpu", "small")):
        assert limited.run(req) == "ran"
    assert len(runner.asked) == 2


def test_a_served_app_wraps_its_runner_in_its_limits(tmp_path, monkeypatch):
    pytest.importorskip("textual")
    from lab.tui.app import MemLabApp

    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    monkeypatch.setenv(LIMITS_ENV, TabLimits(modes=("sim",)).to_env())
    app = MemLabApp(runner=Runner(), gpu=None)
    assert isinstance(app.runner, LimitedRunner) and app.runner.limits.modes == ("sim",)
