"""The lab inside JupyterHub, without a hub (issue 39): the launcher entry, the guard that trusts
only the proxy, the lab's page under a prefix, hub users' folders, the class service's API and
its OAuth login (JupyterHub's own `HubOAuth`, with the two calls that reach a hub answered
here), and the learner's server syncing with the service. tests/tui/test_hub.py runs the real
hub, a browser and three learners.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

aiohttp = pytest.importorskip("aiohttp", reason="the serve extra: pip install 'memlab[serve]'")
pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")
from aiohttp import web  # noqa: E402
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from lab.serve.classroom import Classroom  # noqa: E402
from lab.serve.hub.launcher import PROXY_HEADER, PROXY_SECRET_ENV, setup_memlab  # noqa: E402
from lab.serve.hub.names import FolderRefused, candidates, folder_of  # noqa: E402
from lab.serve.page import PAGE_ORIGIN  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s" * 43
SCOPE = "access:services!service=memlab-class"
PREFIX = "/services/memlab-class/"


# ---- the launcher entry -------------------------------------------------------------------------
def test_the_launcher_entry_is_a_valid_server_process_with_a_fresh_secret_each_time():
    proxy = pytest.importorskip("jupyter_server_proxy.config", reason="memlab[hub]")
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="jupyter_serverproxy_servers") if e.name == "memlab"]
    assert found and found[0].load() is setup_memlab  # what a learner's server finds
    one, two = setup_memlab(), setup_memlab()
    server = proxy.ServerProcess(name="memlab", **one)  # jupyter-server-proxy's own traits
    assert server.launcher_entry.title == "GPU Memory Lab" and server.unix_socket is True
    assert Path(server.launcher_entry.icon_path).read_text().lstrip().startswith("<svg")
    assert server.command[1:] == ["-m", "lab", "serve", "--hub", "--unix-socket",
                                  "{unix_socket}"]
    # the proxy adds the secret the lab is given; every Jupyter server makes its own
    assert one["environment"][PROXY_SECRET_ENV] == one["request_headers_override"][PROXY_HEADER]
    assert one["environment"][PROXY_SECRET_ENV] != two["environment"][PROXY_SECRET_ENV]


def test_the_hubs_configuration_sets_every_labs_limits(monkeypatch):
    from lab.serve.hub.launcher import LIMITS_ENV

    monkeypatch.setenv(LIMITS_ENV, "--tab-modes sim,cpu --max-tabs 2")
    command = setup_memlab()["command"]
    assert command[command.index("{unix_socket}") + 1:] == ["--tab-modes", "sim,cpu",
                                                            "--max-tabs", "2"]
    import argparse

    from lab.commands.serve_cmd import add_parser  # what `memlab serve` makes of them

    sub = argparse.ArgumentParser().add_subparsers()
    add_parser(sub)
    args = sub.choices["serve"].parse_args(command[4:])
    assert args.hub and args.tab_modes == "sim,cpu" and args.max_tabs == "2"


# ---- the lab behind the proxy -------------------------------------------------------------------
def _hub_server(tmp_path, **kw):
    from lab.serve.hub.lab_server import HubLabServer

    return HubLabServer(tmp_path / "hub", "Zoë.M@uni.example", SECRET, tmp_path / "home",
                        say=lambda text: None, **kw)


class _OnSocket:
    """The lab on a Unix socket, as jupyter-server-proxy runs it; a client through it."""

    def __init__(self, server, path: Path):
        self.server, self.path = server, path

    async def __aenter__(self):
        self.runner = web.AppRunner(await self.server._make_app())
        await self.runner.setup()
        await web.UnixSite(self.runner, str(self.path)).start()
        self.session = aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(self.path)))
        return self

    async def get(self, path: str, **headers):
        async with self.session.get(f"http://127.0.0.1:8000{path}", headers=headers,
                                    allow_redirects=False) as resp:
            return resp.status, await resp.text()

    async def __aexit__(self, *exc):
        await self.session.close()
        await self.runner.cleanup()


async def test_behind_the_proxy_only_requests_with_its_secret_get_through(tmp_path):
    server = _hub_server(tmp_path)
    async with _OnSocket(server, tmp_path / "sock") as lab:
        assert (await lab.get("/"))[0] == 403  # the socket alone is not enough
        assert (await lab.get("/", **{PROXY_HEADER: "s" * 42 + "x"}))[0] == 403
        assert (await lab.get("/static/js/textual.js"))[0] == 403
        status, page = await lab.get("/", **{PROXY_HEADER: SECRET})
        assert status == 200 and "textual.js" in page  # no name form: the hub named the learner
        assert (await lab.get("/learner", **{PROXY_HEADER: SECRET}))[0] == 404
        # a page of another site may not open the learner's socket, even through the proxy
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await lab.session.ws_connect("http://127.0.0.1:8000/ws", headers={
                PROXY_HEADER: SECRET, "Origin": "http://evil.example"})
        assert e.value.status == 403


async def test_behind_the_proxy_a_tcp_peer_must_be_loopback(tmp_path):
    from aiohttp.test_utils import make_mocked_request

    from lab.serve.hub.proxy_guard import from_the_proxys_side

    class Transport:
        def __init__(self, peer):
            self.peer = peer

        def get_extra_info(self, key, default=None):
            return {"peername": (self.peer, 5555), "socket": None}.get(key, default)

    for peer, ok in (("127.0.0.1", True), ("::1", True), ("10.1.2.3", False),
                     ("192.168.0.7", False)):
        request = make_mocked_request("GET", "/", transport=Transport(peer))
        assert from_the_proxys_side(request) is ok, peer
    server = _hub_server(tmp_path)
    client = TestClient(TestServer(await server._make_app(), host="127.0.0.1"))
    await client.start_server()
    try:  # loopback TCP with the secret: through
        assert (await client.get("/", headers={PROXY_HEADER: SECRET})).status == 200
    finally:
        await client.close()


def test_a_tab_behind_the_hub_has_the_learners_home_and_none_of_the_servers_secrets(
        tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-token-of-the-server")
    monkeypatch.setenv(PROXY_SECRET_ENV, SECRET)
    server = _hub_server(tmp_path)
    server.command = f"{sys.executable} -c \"import os, json; print(json.dumps(dict(os.environ)))\""
    out = subprocess.run(["sh", "-c", server.tab_command(server.learner_of(None))],
                         capture_output=True, text=True, env=os.environ).stdout
    env = json.loads(out)
    assert "JUPYTERHUB_API_TOKEN" not in env and PROXY_SECRET_ENV not in env
    assert env["MEMLAB_HOME"] == str(tmp_path / "home")  # their own data folder
    assert env["MEMLAB_LEARNER"] == "zoe-m-uni-example" and env["MEMLAB_SERVED"] == "1"
    assert env["MEMLAB_CLASS"] == str(tmp_path / "hub")  # the class, mirrored from the service


async def test_the_labs_page_has_only_relative_addresses(tmp_path):
    from lab.serve.page import PageError, relative_page
    from lab.serve.server import LabServer

    server = LabServer(tmp_path, say=lambda text: None)
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    try:
        form = await (await client.get("/")).text()
        assert 'action="learner"' in form  # relative: /user/ada/memlab/learner behind a hub
        resp = await client.post("/learner", data={"name": "ada"}, allow_redirects=False)
        assert resp.headers["Location"] == "./"
        page = await (await client.get("/")).text()
    finally:
        await client.close()
    # nothing root-absolute or absolute is left: the browser resolves all beside the page
    assert PAGE_ORIGIN.split("//")[1] not in page and 'src="/' not in page
    assert 'href="static/css/xterm.css"' in page and 'src="static/js/textual.js"' in page
    assert 'new URL("ws", document.baseURI)' in page
    with pytest.raises(PageError):  # a textual-serve whose page changed shape is said, not served
        relative_page("<html><body>no addresses</body></html>")


HUB_ENV = ("JUPYTERHUB_USER", PROXY_SECRET_ENV, "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_URL",
           "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_CLIENT_ID", "MEMLAB_CLASS_URL")


def test_serve_hub_outside_a_hub_says_what_is_missing_in_one_line(tmp_path, monkeypatch,
                                                                   capsys):
    from lab.cli import main

    for key in HUB_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    # the command itself once (exit status, stderr); the other refusals in this process: each
    # is said before anything starts listening
    out = subprocess.run([sys.executable, "-m", "lab", "serve", "--hub"], capture_output=True,
                         text=True, env=os.environ)
    assert out.returncode == 2 and "missing $JUPYTERHUB_USER" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    # without the hub extra (the README's `.[test]` install) `class --hub` names what to install
    import importlib.util

    hub_missing = ("runs as a JupyterHub service" if importlib.util.find_spec("jupyterhub")
                   else "needs jupyterhub: pip install 'memlab[hub]'")
    for args, says in ((["serve", "--unix-socket", "s"], "--unix-socket is for --hub"),
                       (["serve", "--hub", "--token", "t"], "--token is not for --hub"),
                       (["serve", "--hub", "--max-tabs", "0"], "--max-tabs"),
                       (["class", "--hub"], hub_missing),
                       (["class", "goto", "02", "--hub"], "$MEMLAB_CLASS_URL is not set")):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, (args, err)


# ---- hub users' folders -------------------------------------------------------------------------
def test_each_hub_user_gets_one_folder_no_other_user_can_take(tmp_path):
    assert folder_of(tmp_path, "a.b", 10) == "a-b"
    assert folder_of(tmp_path, "a.b", 10) == "a-b"  # the same, for good
    other = folder_of(tmp_path, "a-b", 10)  # sanitises the same: another folder
    assert other == candidates("a-b")[1] and other != "a-b"
    assert (tmp_path / "claims" / "a-b").read_text().strip() == "hub:a.b"
    # a user named like the hashed folder of another gets a folder of its own too
    assert folder_of(tmp_path, other, 10) not in ("a-b", other)
    with pytest.raises(FolderRefused):
        folder_of(tmp_path, "newcomer", 3)  # the class is full


# ---- the class service, with JupyterHub's HubOAuth ----------------------------------------------
def _auth(models: dict, codes: dict):
    auth_mod = pytest.importorskip("jupyterhub.services.auth", reason="memlab[hub]")

    class Hub(auth_mod.HubOAuth):
        """HubOAuth whose two calls to a hub are answered here (tokens -> user models)."""

        def user_for_token(self, token, use_cache=True, session_id="", *, sync=True):
            async def answer():
                return json.loads(json.dumps(models[token])) if token in models else None
            return answer()

        def token_for_code(self, code, *, code_verifier=None, sync=True):
            async def answer():
                if code not in codes:
                    raise RuntimeError("the hub refused the code")
                return codes[code]
            return answer()

    return Hub(api_token="service-token", oauth_client_id="service-memlab-class",
               base_url=PREFIX, access_scopes={SCOPE}, hub_prefix="/hub/")


def _model(name: str, groups=(), scopes=(SCOPE,), kind="user") -> dict:
    return {"name": name, "kind": kind, "groups": list(groups), "scopes": list(scopes)}


MODELS = {"t-ada": _model("ada"), "t-bob": _model("bob"),
          "t-teacher": _model("teacher", groups=["instructors"]),
          "t-noscope": _model("eve", scopes=["read:users:name!user=eve"])}


async def _service(tmp_path, codes=None):
    from lab.serve.hub.service import ClassService

    auth = _auth(MODELS, codes or {})
    service = ClassService(tmp_path / "class", auth)
    client = TestClient(TestServer(service.make_app()))
    await client.start_server()
    return service, client


def _token(name: str) -> dict:
    return {"Authorization": f"token t-{name}"}


def _progress_text(lesson: str = "linear-baseline", prediction: float = 4.0) -> bytes:
    lines = [{"kind": "meta", "version": 1, "last_lesson": lesson},
             {"kind": "lesson", "id": lesson, "runs": 1, "prediction_gb": prediction}]
    return "\n".join(json.dumps(x) for x in lines).encode() + b"\n"


async def test_a_learner_reports_only_under_their_own_hub_name(tmp_path):
    service, client = await _service(tmp_path)
    try:
        url = PREFIX + "api/learners/{}/progress"
        resp = await client.put(url.format("ada"), data=_progress_text(), headers=_token("ada"))
        assert resp.status == 200 and (await resp.json())["folder"] == "ada"
        resp = await client.put(url.format("ada"), data=_progress_text(prediction=99),
                                headers=_token("bob"))  # bob, as ada
        assert resp.status == 403 and "only their own" in (await resp.json())["error"]
        assert (await client.put(url.format("ada"), data=b"x")).status == 401  # no token
        resp = await client.put(url.format("eve"), data=b"", headers=_token("noscope"))
        assert resp.status == 403 and SCOPE in (await resp.json())["error"]
        resp = await client.put(url.format("ada"), data=b"", headers={"Authorization": "token x"})
        assert resp.status == 403  # a token the hub does not know
        resp = await client.put(url.format("bob"), data=b"\x00garbage\n{", headers=_token("bob"))
        assert resp.status == 400  # not a progress file
        resp = await client.put(url.format("bob"), data=b"{" * (9 << 20), headers=_token("bob"))
        assert resp.status == 413
        # ada's file is hers, as she sent it, where `memlab class` reads it
        saved = tmp_path / "class" / "learners" / "ada" / "progress.jsonl"
        assert saved.read_bytes() == _progress_text()
        assert not (tmp_path / "class" / "learners" / "eve").exists()
    finally:
        await client.close()


async def test_only_instructors_push_move_or_clear_the_class(tmp_path):
    service, client = await _service(tmp_path)
    recording = json.loads((ROOT / "assets/reference/linear-baseline/baseline.json").read_text())
    try:
        for path, body in (("api/push", [recording]), ("api/goto", {"lesson": "02"}),
                           ("api/clear", {})):
            resp = await client.post(PREFIX + path, json=body, headers=_token("bob"))
            assert resp.status == 403 and "only instructors" in (await resp.json())["error"]
        resp = await client.post(PREFIX + "api/push", json=[recording], headers=_token("teacher"))
        assert resp.status == 200
        resp = await client.post(PREFIX + "api/goto", json={"lesson": "02"},
                                 headers=_token("teacher"))
        assert resp.status == 200 and (await resp.json())["lesson"] == "forward-backward"
        # every learner reads the class and the pushed runs
        state = await (await client.get(PREFIX + "api/class", headers=_token("bob"))).json()
        assert state["lesson"]["id"] == "forward-backward" and "linear-baseline" in state["pushes"]
        runs = await (await client.get(PREFIX + "api/runs/linear-baseline",
                                        headers=_token("ada"))).json()
        assert [r["variant"] for r in runs["runs"]] == ["baseline"]
        bad = await client.post(PREFIX + "api/push", json=[{"lesson": "x"}],
                                headers=_token("teacher"))
        assert bad.status == 400  # not a run: decoded and refused, nothing written
        bad = await client.post(PREFIX + "api/goto", json={"lesson": "99"},
                                headers=_token("teacher"))
        assert bad.status == 400
        # the class survives the service's restart: a new service on the same folder
        from lab.serve.hub.service import ClassService

        again = ClassService(service.root, service.auth)
        assert again.room.read()["lesson"]["id"] == "forward-backward"
        assert list(again.room.pushed("linear-baseline")) == ["baseline"]
    finally:
        await client.close()


async def test_the_class_page_logs_in_with_the_hub_and_is_for_instructors(tmp_path):
    codes = {"code-teacher": "t-teacher", "code-bob": "t-bob"}
    service, client = await _service(tmp_path, codes)
    try:
        (tmp_path / "class" / "learners" / "ada").mkdir(parents=True)
        (tmp_path / "class" / "learners" / "ada" / "progress.jsonl").write_bytes(_progress_text())
        # 1: no login yet: to the hub's authorize page, with a state this browser's cookie holds
        resp = await client.get(PREFIX + "class.csv", allow_redirects=False)
        assert resp.status == 302
        where = urlsplit(resp.headers["Location"])
        assert where.path == "/hub/api/oauth2/authorize"
        query = parse_qs(where.query)
        assert query["client_id"] == ["service-memlab-class"]
        assert query["code_challenge_method"] == ["S256"]  # PKCE (JupyterHub 6)
        state = query["state"][0]
        # 2: a callback whose state is not this browser's is refused
        other = TestClient(TestServer(service.make_app()))
        await other.start_server()
        try:
            resp = await other.get(f"{PREFIX}oauth_callback?code=code-bob&state={state}",
                                   allow_redirects=False)
            assert resp.status == 403
        finally:
            await other.close()
        resp = await client.get(f"{PREFIX}oauth_callback?code=nope&state={state}",
                                allow_redirects=False)
        assert resp.status in (403, 502)  # a code the hub refuses (or a state used up)
        # ... and the right one logs in, back to the page asked for
        resp = await client.get(PREFIX + "class.csv", allow_redirects=False)
        state = parse_qs(urlsplit(resp.headers["Location"]).query)["state"][0]
        resp = await client.get(f"{PREFIX}oauth_callback?code=code-teacher&state={state}",
                                allow_redirects=False)
        assert resp.status == 302 and resp.headers["Location"] == PREFIX + "class.csv"
        login = next(c for c in resp.headers.getall("Set-Cookie")
                     if c.startswith("service-memlab-class="))
        assert "HttpOnly" in login and f"Path={PREFIX}" in login
        resp = await client.get(PREFIX + "class.csv")
        assert resp.status == 200 and "linear-baseline,ada," in await resp.text()
        page = await (await client.get(PREFIX)).text()
        assert "Signed in as teacher" in page and "Lesson 01" in page
        # a lesson's page is found by the number the app shows (folder 28, overlapped-offload,
        # is the course's 12th), which the links use
        assert "href='lesson/01'" in page
        one = await (await client.get(PREFIX + "lesson/12")).text()
        assert "overlapped-offload" in one or "Streams and overlapped offload" in one
        # a script on another page of the hub's origin may not read it with that login
        for mode in ("cors", "same-origin"):
            resp = await client.get(PREFIX, headers={"Sec-Fetch-Mode": mode},
                                    allow_redirects=False)
            assert resp.status == 403, mode
        resp = await client.get(PREFIX, headers={"Sec-Fetch-Mode": "navigate"})
        assert resp.status == 200
        # the service restarted (a new process on the same folder): still signed in
        again = TestClient(TestServer(type(service)(service.root, service.auth).make_app()),
                           cookie_jar=client.session.cookie_jar)
        await again.start_server()
        try:
            assert (await again.get(PREFIX, allow_redirects=False)).status == 200
        finally:
            await again.close()
        # a cookie the service did not sign is no login (a page elsewhere on the hub's origin
        # could set one)
        client.session.cookie_jar.clear()
        resp = await client.get(PREFIX, headers={"Cookie": "service-memlab-class=t-teacher"},
                                allow_redirects=False)
        assert resp.status == 302
    finally:
        await client.close()


async def test_a_learner_logged_in_with_the_hub_does_not_see_the_class(tmp_path):
    service, client = await _service(tmp_path, {"code-bob": "t-bob"})
    try:
        resp = await client.get(PREFIX, allow_redirects=False)
        state = parse_qs(urlsplit(resp.headers["Location"]).query)["state"][0]
        resp = await client.get(f"{PREFIX}oauth_callback?code=code-bob&state={state}")
        assert resp.status == 403 and "for instructors" in await resp.text()
    finally:
        await client.close()


# ---- the learner's server and the service -------------------------------------------------------
async def test_the_learners_server_reports_progress_and_mirrors_the_class(tmp_path):
    from lab.serve.hub.client import ClassClient
    from lab.serve.hub.sync import ClassLink

    service, client = await _service(tmp_path)
    base = str(client.make_url(PREFIX))
    progress = tmp_path / "home" / "progress.jsonl"
    mirror = Classroom(tmp_path / "mirror")
    said = []
    link = ClassLink(ClassClient(base, "t-ada"), "ada", progress, mirror, say=said.append)
    recording = json.loads((ROOT / "assets/reference/linear-baseline/baseline.json").read_text())
    try:
        async with link.client:
            await link.tick()  # joined: an empty progress, so the instructor sees who came
            assert (tmp_path / "class/learners/ada/progress.jsonl").read_bytes() == b""
            assert await link.send_progress() is False  # unchanged: not sent again
            progress.parent.mkdir(parents=True)
            progress.write_bytes(_progress_text())
            await link.tick()
            assert (tmp_path / "class/learners/ada/progress.jsonl").read_bytes() \
                == _progress_text()
            # the instructor pushes and moves the class: the mirror follows, runs before state
            await client.post(PREFIX + "api/push", json=[recording], headers=_token("teacher"))
            await client.post(PREFIX + "api/goto", json={"lesson": "03"},
                              headers=_token("teacher"))
            await link.tick()
            here = mirror.read()
            assert here["lesson"]["id"] == service.room.read()["lesson"]["id"]
            assert list(mirror.pushed("linear-baseline")) == ["baseline"]
            assert await link.fetch_class() is False  # nothing new
        assert said == []
        # the service gone: said once, the lab goes on
        link = ClassLink(ClassClient("http://127.0.0.1:9/", "t-ada"), "ada", progress, mirror,
                         say=said.append)
        async with link.client:
            await link.tick()
            await link.tick()
        assert len(said) == 1 and "cannot reach the class service" in said[0]
    finally:
        await client.close()
