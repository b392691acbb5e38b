"""`memlab serve`: the access guard on every route (the websocket included), learners' names,
one app process per tab in the learner's own folder, and the served-mode path policy."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from lab.serve import policy
from lab.serve.workshop import learner_home, load_or_create_token, sanitize_name

aiohttp = pytest.importorskip("aiohttp", reason="the serve extra: pip install 'memlab[serve]'")
pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from lab.serve.server import LabServer  # noqa: E402

TOKEN = "s3cret-token"
ROUTES = ["/", "/ws", "/static/js/textual.js", "/download/abc", "/learner?name=eve"]


@pytest.mark.parametrize("raw, name", [("Zoë Martin", "zoe-martin"), ("../../etc", "etc"),
                                       ("ADA_lovelace", "ada_lovelace"), (" a//b ", "a-b"),
                                       ("x" * 80, "x" * 32),
                                       # other alphabets are names too (issue 34: refused)
                                       ("李雷", "李雷"), ("Иван Петров", "иван-петров"),
                                       ("अनिल", "अनिल"), ("ＡＤＡ", "ada"),
                                       ("ada\u202eadmin", "ada-admin"), ("日本" * 40, "日本" * 16)])
def test_names_become_one_safe_folder(raw, name):
    assert sanitize_name(raw) == name


@pytest.mark.parametrize("raw", ["", "..", "///", "\u202e\u200b", "!?", "\x00\x1b"])
def test_names_with_nothing_usable_are_refused(raw):
    with pytest.raises(ValueError):
        sanitize_name(raw)


def test_the_token_is_made_once_and_kept_private(tmp_path):
    token = load_or_create_token(tmp_path)
    assert load_or_create_token(tmp_path) == token and len(token) >= 24
    assert (tmp_path / "token").stat().st_mode & 0o077 == 0


async def _client(tmp_path, token=TOKEN):
    server = LabServer(tmp_path, "0.0.0.0" if token else "127.0.0.1", 8000, token,
                       say=lambda text: None)
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    return server, client


@pytest.mark.parametrize("route", ROUTES)
async def test_without_the_token_every_route_is_refused(tmp_path, route):
    _, client = await _client(tmp_path)
    try:
        resp = await client.get(route, allow_redirects=False)
        assert resp.status == 403
        assert "access token" in await resp.text()
        resp = await client.get(route + ("&" if "?" in route else "?") + "token=wrong",
                                allow_redirects=False)
        assert resp.status == 403
    finally:
        await client.close()
    assert not (tmp_path / "learners" / "eve").exists()  # nothing ran, nothing was created


async def test_the_websocket_handshake_without_the_token_is_refused(tmp_path):
    _, client = await _client(tmp_path)
    try:
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await client.ws_connect("/ws?width=80&height=24")
        assert e.value.status == 403
    finally:
        await client.close()


async def test_the_token_once_then_a_cookie_then_a_name(tmp_path):
    _, client = await _client(tmp_path)
    try:
        resp = await client.get(f"/?token={TOKEN}", allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"] == "/"  # token out of the URL
        assert "HttpOnly" in resp.headers["Set-Cookie"]
        page = await (await client.get("/")).text()  # the cookie now
        assert 'name="name"' in page  # a name first
        resp = await client.post("/learner", data={"name": "Ada Lovelace"},
                                 allow_redirects=False)
        assert resp.status == 303
        assert (tmp_path / "learners" / "ada-lovelace").is_dir()
        page = await (await client.get("/")).text()
        assert "/ws" in page and "textual.js" in page  # the terminal page
        static = await client.get("/static/js/textual.js")
        assert static.status == 200
        bad = await client.post("/learner", data={"name": "///"})
        assert "Please use" in await bad.text()
        # a page on another site may not open the socket, even with the learner's cookies
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await client.ws_connect("/ws", headers={"Origin": "http://evil.example"})
        assert e.value.status == 403
    finally:
        await client.close()


async def test_on_loopback_without_a_token_the_host_must_be_loopback(tmp_path):
    _, client = await _client(tmp_path, token=None)
    try:
        assert (await client.get("/", headers={"Host": "localhost:8000"})).status == 200
        resp = await client.get("/", headers={"Host": "attacker.example:8000"})
        assert resp.status == 403  # DNS rebinding
    finally:
        await client.close()


def test_each_tab_runs_in_its_learners_folder_in_served_mode(tmp_path):
    server = LabServer(tmp_path, say=lambda text: None)
    cmd = server.tab_command("ada")
    assert f"MEMLAB_HOME={tmp_path / 'learners' / 'ada'}" in cmd
    assert "MEMLAB_SERVED=1" in cmd and "MEMLAB_LEARNER=ada" in cmd
    assert cmd.endswith("-m lab") and server.command.endswith("-m lab")
    assert "MEMLAB_RUNNER_HOME=" in cmd  # every tab: the machine's one runner service


def test_every_tab_finds_the_servers_runner_service(tmp_path, monkeypatch):
    from lab.runner.paths import socket_path

    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / "server"))
    server_socket = socket_path()
    cmd = LabServer(tmp_path / "ws", say=lambda text: None).tab_command("ada")
    # exec env -u SECRET ... VAR=value ... python -m lab
    env = dict(part.split("=", 1) for part in shlex.split(cmd)[2:-3] if "=" in part)
    monkeypatch.setenv("MEMLAB_HOME", env["MEMLAB_HOME"])  # the learner's folder ...
    monkeypatch.setenv("MEMLAB_RUNNER_HOME", env["MEMLAB_RUNNER_HOME"])
    assert socket_path() == server_socket  # ... and still the server's service
    with pytest.raises(ValueError):
        learner_home(tmp_path, "../x")


def test_served_mode_opens_paths_only_inside_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    assert policy.allowed_path("/etc/passwd") == __import__("pathlib").Path("/etc/passwd")
    monkeypatch.setenv(policy.SERVED_ENV, "1")
    with pytest.raises(policy.Refused):
        policy.allowed_path("/etc/passwd")
    with pytest.raises(policy.Refused):
        policy.allowed_path("../../etc/passwd")
    for outside in ("/dev/zero", "a\0b", str(tmp_path / ".." / "x")):
        with pytest.raises(policy.Refused):
            policy.allowed_path(outside)
    # `~` is the server account's home, not the learner's: a folder named so, inside
    assert policy.allowed_path("~/x").is_relative_to(tmp_path.resolve())
    (tmp_path / "link").symlink_to("/etc/passwd")  # inside, pointing out: outside
    with pytest.raises(policy.Refused):
        policy.allowed_path("link")
    assert policy.allowed_path("snap.pickle") == (tmp_path / "snap.pickle").resolve()
    with pytest.raises(policy.Refused):
        policy.refuse_if_served("profile")


def test_the_server_imports_no_textual():
    # the server process only serves pages and starts tabs; each tab's process has the app
    code = ("import sys, lab.serve.server; "
            "sys.exit(1 if 'textual' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---- the real command ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path, *args):
    port = _free_port()
    env = {**os.environ, "MEMLAB_HOME": str(tmp_path / "home")}
    env.pop("MEMLAB_SERVE_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--port", str(port),
                             "--data", str(tmp_path / "ws"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for _ in range(300):  # up to 30 s on a busy machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stdout.read())
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("memlab serve did not listen")


def _status(url: str, headers: dict | None = None) -> int:
    """The final status (redirects followed, cookies kept as a browser would)."""
    req = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def _stop(proc) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def test_memlab_serve_answers_http_on_localhost(tmp_path):
    proc, port = _serve(tmp_path)
    try:
        assert _status(f"http://127.0.0.1:{port}/") == 200
    finally:
        out = _stop(proc)
    assert f"open: http://localhost:{port}/" in out and "ssh -N -L" in out


def test_memlab_serve_on_every_address_refuses_what_lacks_the_token(tmp_path):
    proc, port = _serve(tmp_path, "--host", "0.0.0.0")
    try:
        base = f"http://127.0.0.1:{port}"
        ws = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        assert _status(f"{base}/") == 403
        assert _status(f"{base}/ws", ws) == 403
        token = (tmp_path / "ws" / "token").read_text().strip()
        assert _status(f"{base}/?token={token}") == 200  # the redirect, then the cookie works
        assert _status(f"{base}/static/js/textual.js?token={token}") == 200
        assert _status(f"{base}/", {"Cookie": "memlab_session=¹.a.b"}) == 403  # was a 500
    finally:
        out = _stop(proc)
    assert f"?token={token}" in out and "TLS" in out
    # the startup line the instructor copies, and nowhere else (issue 34: the access log wrote
    # it on every line; a 500's traceback showed it among the guard's local variables)
    assert out.count(token) == 1
    assert '"GET /static/js/textual.js"' in out  # the access log is kept, less the query
    assert "Traceback" not in out and " 500 " not in out


def test_without_the_serve_extra_it_says_so_in_one_line():
    code = ("import sys; sys.modules['textual_serve'] = None; from lab.cli import main; "
            "sys.exit(main(['serve']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("memlab: error: memlab serve needs textual-serve: "
                                   "pip install 'memlab[serve]'")
