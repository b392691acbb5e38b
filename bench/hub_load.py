"""A real JupyterHub with the lab, on loopback: N learners open the lab in their hub servers and
predict and play lesson 01; the class service and every process is measured.

    PYTHONPATH=. python bench/hub_load.py [--learners 10] [--hold 60] [--json FILE]

The hub: `jupyterhub` (PyPI) with configurable-http-proxy (npm), the dummy authenticator and the
local process spawner (each learner's Jupyter server a process of this account; `--allow-root`
when that is root), configured by the block of docs/WORKSHOPS.md that an instructor copies
(the service, the roles, the instructors' group), with this machine's ports and folders put
in. The same harness runs tests/tui/test_hub.py (three learners, a browser, the refusals).

Prints (never asserted):
  seconds           the hub answering; every learner's server ready; every learner having
                    played lesson 01's recording in the lab behind the hub's proxy
  key -> screen     for `--hold` seconds every learner presses Tab about once a second through
                    the hub's proxy and jupyter-server-proxy; p50, p95, max; a key with no answer
                    within 5 s, a refused or dropped socket, is an error
  class service     every learner's progress reached it (the class view's rows), and its errors
  memory            RSS of the hub, the proxy, the class service, and per learner: the Jupyter
                    server, the lab's server and its tab's app (the run workers are not kept:
                    the recording is played back)

Loopback only, a temporary folder, MEMLAB_RUNNER=direct. Linux: processes found through /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "WORKSHOPS.md"
CONFIG_MARK = "# jupyterhub_config.py: GPU Memory Lab"  # the first line of the docs' block
LESSON = "linear-baseline"
PREDICTION = "4"  # GB
PASSWORD = "memlab-hub-password"  # the dummy authenticator's one password
ADMIN_SERVICE = "memlab-test-admin"  # the harness's own: starts servers, makes tokens
SERVICE = "memlab-class"
KEY_TIMEOUT_S = 5.0
TAB = "\t"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def docs_config() -> str:
    """The hub configuration docs/WORKSHOPS.md gives (the python block that starts with
    CONFIG_MARK)."""
    text = DOCS.read_text(encoding="utf-8")
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        if block.startswith(CONFIG_MARK):
            return block
    raise LookupError(f"docs/WORKSHOPS.md has no python block starting {CONFIG_MARK!r}")


def chp() -> str:
    found = shutil.which("configurable-http-proxy")
    if not found:
        raise FileNotFoundError("configurable-http-proxy is not installed (npm install -g "
                                "configurable-http-proxy; .ci/run does)")
    return found


# ---- the hub ------------------------------------------------------------------------------------
class Hub:
    def __init__(self, work: Path, instructors: list[str], learner_env: dict | None = None):
        self.work = Path(work)
        self.instructors = instructors
        self.port, self.api_port, self.hub_port = free_port(), free_port(), free_port()
        self.service_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.class_url = f"{self.url}/services/{SERVICE}/"
        self.class_data = self.work / "class-data"
        self.homes = self.work / "homes"
        self.admin_token = secrets.token_hex(16)
        self.learner_env = {"MEMLAB_RUNNER": "direct", "MEMLAB_TEST_STATE": "1",
                            **(learner_env or {})}
        self.proc: subprocess.Popen | None = None
        self.log = self.work / "hub.log"

    def memlab_home(self, user: str) -> Path:
        return self.homes / user / "memlab"

    def config(self) -> str:
        singleuser = Path(sys.executable).with_name("jupyterhub-singleuser")
        root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
        return "\n".join([
            "c = get_config()  # noqa",
            "# ---- the harness: this machine (loopback, temporary folders) ----",
            f"c.JupyterHub.ip = '127.0.0.1'; c.JupyterHub.port = {self.port}",
            f"c.JupyterHub.hub_ip = '127.0.0.1'; c.JupyterHub.hub_port = {self.hub_port}",
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{self.api_port}'",
            f"c.ConfigurableHTTPProxy.command = [{chp()!r}]",
            f"c.JupyterHub.db_url = 'sqlite:///{self.work / 'jupyterhub.sqlite'}'",
            f"c.JupyterHub.cookie_secret_file = {str(self.work / 'cookie_secret')!r}",
            f"c.ConfigurableHTTPProxy.pid_file = {str(self.work / 'proxy.pid')!r}",
            "c.JupyterHub.authenticator_class = 'dummy'",
            f"c.DummyAuthenticator.password = {PASSWORD!r}",
            "c.Authenticator.allow_all = True",
            "c.JupyterHub.spawner_class = 'simple'",
            f"c.SimpleLocalProcessSpawner.home_dir_template = {str(self.homes / '{username}')!r}",
            f"c.Spawner.cmd = [{str(singleuser)!r}]",
            f"c.Spawner.args = {['--allow-root'] if root else []!r}",
            "c.Spawner.http_timeout = 120",
            "c.Spawner.start_timeout = 120",
            "",
            "# ---- docs/WORKSHOPS.md, as an instructor copies it ----",
            docs_config(),
            "",
            "# ---- the harness: the block's host-specific values, for this machine ----",
            "service = next(s for s in c.JupyterHub.services if s['name'] == 'memlab-class')",
            f"service['url'] = 'http://127.0.0.1:{self.service_port}'",
            "service['command'][service['command'].index('--data') + 1] = "
            f"{str(self.class_data)!r}",
            f"c.JupyterHub.load_groups = {{'instructors': {{'users': {self.instructors!r}}}}}",
            f"c.Spawner.environment['MEMLAB_CLASS_URL'] = {self.class_url!r}",
            f"c.Spawner.environment.update({self.learner_env!r})",
            f"homes = {str(self.homes)!r}",
            "c.Spawner.environment['MEMLAB_HOME'] = "
            "lambda spawner: f'{homes}/{spawner.user.name}/memlab'",
            f"c.JupyterHub.services.append({{'name': {ADMIN_SERVICE!r}, "
            f"'api_token': {self.admin_token!r}}})",
            f"c.JupyterHub.load_roles.append({{'name': {ADMIN_SERVICE!r}, "
            f"'services': [{ADMIN_SERVICE!r}], "
            "'scopes': ['admin:users', 'admin:servers', 'tokens', 'list:users']})",
            ""])

    async def start(self, timeout_s: float = 60) -> float:
        """Start the hub; the seconds until its API answered."""
        import aiohttp

        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "jupyterhub_config.py").write_text(self.config(), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(self.work / "jupyterhub_config.py")],
            cwd=self.work, stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
        async with aiohttp.ClientSession() as session:
            while time.monotonic() - t0 < timeout_s:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"jupyterhub exited: {self.tail()}")
                try:
                    async with session.get(f"{self.url}/hub/api/") as resp:
                        if resp.status == 200:
                            return time.monotonic() - t0
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError(f"the hub did not answer within {timeout_s:g} s: {self.tail()}")

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    async def api(self, method: str, path: str, **kw):
        import aiohttp

        async with aiohttp.ClientSession() as session:
            async with session.request(method, f"{self.url}/hub/api/{path}",
                                       headers={"Authorization": f"token {self.admin_token}"},
                                       **kw) as resp:
                text = await resp.text()
                if resp.status >= 300:
                    raise RuntimeError(f"hub API {method} {path}: {resp.status} {text[:300]}")
                return json.loads(text) if text.strip() else None

    async def start_server(self, user: str, timeout_s: float = 120) -> None:
        await self.api("POST", f"users/{user}", json={}) if not await self._exists(user) else None
        await self.api("POST", f"users/{user}/server", json={})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            model = await self.api("GET", f"users/{user}")
            server = (model.get("servers") or {}).get("")
            if server and server.get("ready"):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"{user}'s server was not ready within {timeout_s:g} s: {self.tail()}")

    async def _exists(self, user: str) -> bool:
        try:
            await self.api("GET", f"users/{user}")
            return True
        except RuntimeError:
            return False

    async def token(self, user: str, scopes: list[str]) -> str:
        model = await self.api("POST", f"users/{user}/tokens",
                               json={"scopes": scopes, "note": "memlab hub test"})
        return model["token"]

    async def stop_server(self, user: str, grace_s: float = 30) -> list[str]:
        """Stop a learner's server as their "Stop My Server" does (the hub's API); the command
        lines of their processes (Jupyter server, lab server, tabs) still running `grace_s`
        later."""
        await self.api("DELETE", f"users/{user}/server")
        mine = [f"JUPYTERHUB_USER={user}".encode(),
                f"MEMLAB_HOME={self.memlab_home(user)}".encode()]

        def left() -> list[int]:
            return [pid for pid in processes_of(self.work)
                    if any(m in _environ(pid) for m in mine)]
        deadline = time.monotonic() + grace_s
        while left() and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        return [_cmdline(pid)[:200] for pid in left()]

    def stop(self, graceful: bool = True, grace_s: float = 20) -> list[str]:
        """Stop the hub. Graceful: SIGTERM (it stops the servers and the proxy it started; each
        server's proxy stops its lab, each lab its tabs), and what still runs `grace_s` later is
        killed and returned (command lines). Else everything is killed at once."""
        if self.proc is None:
            return []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        deadline = time.monotonic() + (grace_s if graceful else 0)
        while processes_of(self.work) and time.monotonic() < deadline:
            time.sleep(0.25)
        left = processes_of(self.work)
        described = [_cmdline(pid)[:200] for pid in left]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 5  # a killed process is gone a moment later
        while processes_of(self.work) and time.monotonic() < deadline:
            time.sleep(0.05)
        return described if graceful else []


# ---- processes and their memory -----------------------------------------------------------------
def _environ(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def processes_of(work: Path) -> list[int]:
    """Every process started for this hub: its command line or environment names the work
    folder (the hub, the service's data, the learners' homes), or it is the proxy, whose pid
    the hub writes to `work/proxy.pid` (its command line names no folder, and it runs in a
    session of its own)."""
    mark = str(work).encode()
    found = []
    for pid in _pids():
        if pid == os.getpid():
            continue
        if str(work) in _cmdline(pid) or any(mark in v for v in _environ(pid)):
            found.append(pid)
    try:
        proxy = int((work / "proxy.pid").read_text().strip())
    except (OSError, ValueError):
        proxy = None
    if proxy is not None and "configurable-http-proxy" in _cmdline(proxy):
        found.append(proxy)
    return found


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory(hub: Hub, users: list[str]) -> dict:
    """RSS by role: hub, proxy, class service, and per learner (Jupyter server, lab server,
    tab apps)."""
    out = {"hub": rss_bytes(hub.proc.pid), "proxy": 0, "service": 0, "learners": {}}
    for pid in _pids():
        cmd = _cmdline(pid)
        if "configurable-http-proxy" in cmd and str(hub.api_port) in cmd:
            out["proxy"] += rss_bytes(pid)
        elif "class --hub" in cmd and str(hub.class_data) in cmd:
            out["service"] += rss_bytes(pid)
    for user in users:
        mark = f"JUPYTERHUB_USER={user}".encode()
        parts = {"jupyter": 0, "lab_server": 0, "tabs": 0}
        for pid in _pids():
            env = _environ(pid)
            cmd = _cmdline(pid)
            if mark in env and "jupyterhub-singleuser" in cmd:
                parts["jupyter"] += rss_bytes(pid)
            elif mark in env and "serve --hub" in cmd:
                parts["lab_server"] += rss_bytes(pid)
            elif f"MEMLAB_HOME={hub.memlab_home(user)}".encode() in env and "-m lab" in cmd:
                parts["tabs"] += rss_bytes(pid)
        out["learners"][user] = parts
    return out


# ---- one hub user, over HTTP --------------------------------------------------------------------
class HubUser:
    """A hub user's browser session (cookies), and their lab's websocket as its page opens it."""

    def __init__(self, hub: Hub, name: str):
        self.hub, self.name = hub, name
        self.session = None
        self.ws = None
        self.reader = None
        self.answered = asyncio.Event()
        self.latencies: list[float] = []
        self.errors = 0

    async def login(self) -> None:
        import aiohttp

        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        async with self.session.get(f"{self.hub.url}/hub/login") as resp:
            form = await resp.text()
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form)
        data = {"username": self.name, "password": PASSWORD}
        if xsrf:
            data["_xsrf"] = xsrf.group(1)
        async with self.session.post(f"{self.hub.url}/hub/login", data=data,
                                     allow_redirects=False) as resp:
            if resp.status not in (302, 303):
                raise RuntimeError(f"{self.name}: the hub's login answered {resp.status}")

    async def get(self, path: str) -> tuple[int, str, str]:
        """GET a page of the hub as this user's browser would (redirects followed: the
        servers' and services' OAuth logins); (status, final URL, text)."""
        async with self.session.get(f"{self.hub.url}{path}") as resp:
            return resp.status, str(resp.url), await resp.text(errors="replace")

    async def open_lab(self, user: str | None = None) -> tuple[int, str, str]:
        return await self.get(f"/user/{user or self.name}/memlab/")

    async def connect(self) -> None:
        ws_url = self.hub.url.replace("http:", "ws:", 1)
        self.ws = await self.session.ws_connect(
            f"{ws_url}/user/{self.name}/memlab/ws?width=100&height=30", heartbeat=None,
            origin=self.hub.url)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if isinstance(msg.data, bytes):
                self.answered.set()
        self.errors += 1  # the socket closed under a connected learner

    def state(self) -> dict:
        try:
            return json.loads((self.hub.memlab_home(self.name) / "test-state.json").read_text())
        except (OSError, ValueError):
            return {}

    async def until(self, check, what: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        last: dict = {}
        while time.monotonic() < deadline:
            last = self.state()
            if last and check(last):
                return last
            await asyncio.sleep(0.2)
        raise TimeoutError(f"{self.name}: never showed {what} within {timeout_s:g} s (last: "
                           f"{ {k: last.get(k) for k in ('screen', 'lesson', 'running')} })")

    async def keys(self, *keys: str) -> None:
        for key in keys:
            await self.ws.send_json(["stdin", key])
            await asyncio.sleep(0.05)

    async def predict_and_play(self, timeout_s: float) -> dict:
        await self.until(lambda s: s["screen"] == "HomeScreen", "the course map", timeout_s)
        await self.keys("\r")  # lesson 01, the first row of the course map
        await self.until(lambda s: s["lesson"] == LESSON, "lesson 01", timeout_s)
        await self.keys("r")  # play it: the prediction comes first
        await self.until(lambda s: s["screen"] == "PredictScreen", "the predict box", timeout_s)
        await self.keys(*PREDICTION, "\r")
        return await self.until(lambda s: s["results"] and not s["running"]
                                and s["screen"] != "PredictScreen", "the recording", timeout_s)

    async def hold(self, seconds: float, rng, every_s: float = 1.0) -> None:
        end = time.monotonic() + seconds
        await asyncio.sleep(rng.uniform(0, every_s))
        while time.monotonic() < end:
            await asyncio.sleep(0.3)
            self.answered.clear()
            t = time.monotonic()
            try:
                await self.ws.send_json(["stdin", TAB])
                await asyncio.wait_for(self.answered.wait(), KEY_TIMEOUT_S)
                self.latencies.append(time.monotonic() - t)
            except (asyncio.TimeoutError, ConnectionError, RuntimeError):
                self.errors += 1
            await asyncio.sleep(rng.uniform(0.4, 0.9) * every_s)

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()


async def class_rows(instructor: HubUser, lesson: str = LESSON) -> list[str]:
    """The learners in the class service's CSV for `lesson`, as the instructor downloads it."""
    import csv
    import io

    status, _, text = await instructor.get(f"/services/{SERVICE}/class.csv")
    if status != 200:
        raise RuntimeError(f"the class service's class.csv answered {status}")
    return [row["learner"] for row in csv.DictReader(io.StringIO(text)) if row["lesson"] == lesson]


# ---- the bench ----------------------------------------------------------------------------------
def percentile(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


async def run_load(n: int, work: Path, timeout_s: float, hold_s: float) -> dict:
    names = [f"learner-{i:02d}" for i in range(n)]
    hub = Hub(work, instructors=["teacher"])
    report: dict = {"learners": n}
    users: list[HubUser] = []
    try:
        report["seconds_hub"] = round(await hub.start(), 1)
        t0 = time.monotonic()
        await asyncio.gather(*(hub.start_server(name, timeout_s) for name in names))
        report["seconds_servers_ready"] = round(time.monotonic() - t0, 1)
        users = [HubUser(hub, name) for name in names]
        for u in users:
            await u.login()
        t0 = time.monotonic()
        opened = await asyncio.gather(*(u.open_lab() for u in users))
        report["lab_pages"] = sum(status == 200 and "textual.js" in text
                                  for status, _, text in opened)
        for u in users:
            await u.connect()
        await asyncio.gather(*(u.predict_and_play(timeout_s) for u in users))
        report["seconds_all_played"] = round(time.monotonic() - t0, 1)
        if hold_s:
            import random

            rng = random.Random(39)
            await asyncio.gather(*(u.hold(hold_s, rng) for u in users))
            lat = [x for u in users for x in u.latencies]
            report["hold_s"], report["keys"] = hold_s, len(lat)
            report["key_errors"] = sum(u.errors for u in users)
            report["key_ms"] = {q: round(1e3 * percentile(lat, p), 1) if lat else None
                                for q, p in (("p50", 0.5), ("p95", 0.95), ("max", 1.0))}
        await asyncio.sleep(4)  # a sync tick: every progress reaches the service
        teacher = HubUser(hub, "teacher")
        await teacher.login()
        users.append(teacher)
        rows = await class_rows(teacher)
        report["class_rows"] = len(rows)
        report["class_rows_missing"] = sorted(set(names) - set(rows))
        report["memory"] = memory(hub, names)
        log = hub.tail(100000)
        report["hub_log_errors"] = sum(" E " in line or "Traceback" in line
                                       for line in log.splitlines())
        report["service_errors"] = sum("memlab class" in line and (" 5" in line)
                                       for line in log.splitlines())
        return report
    finally:
        for u in users:
            await u.close()
        hub.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per step")
    parser.add_argument("--hold", type=float, default=60,
                        help="seconds every learner stays, pressing a key about every second")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memlab-hub-load-") as tmp:
        report = asyncio.run(run_load(args.learners, Path(tmp), args.timeout, args.hold))
    n, mb = report["learners"], 1e6
    print(f"learners                 {n} (loopback; JupyterHub, configurable-http-proxy, "
          f"local process spawner)")
    print(f"hub answered in          {report['seconds_hub']} s")
    print(f"servers ready in         {report['seconds_servers_ready']} s (all {n})")
    print(f"lab pages                {report['lab_pages']}/{n} through the hub's proxy; all "
          f"played lesson 01 in {report['seconds_all_played']} s")
    if report.get("hold_s"):
        k = report["key_ms"]
        print(f"key -> screen            {report['keys']} keys in {report['hold_s']:g} s: p50 "
              f"{k['p50']} ms, p95 {k['p95']} ms, max {k['max']} ms; "
              f"{report['key_errors']} error(s)")
    print(f"class service            {report['class_rows']}/{n} learners in the class view "
          f"(missing: {', '.join(report['class_rows_missing']) or 'none'})")
    print(f"errors in the hub's log  {report['hub_log_errors']} (5xx from the service: "
          f"{report['service_errors']})")
    m = report["memory"]
    print(f"hub RSS                  {m['hub'] / mb:.0f} MB; proxy {m['proxy'] / mb:.0f} MB; "
          f"class service {m['service'] / mb:.0f} MB")
    per = list(m["learners"].values())
    for part in ("jupyter", "lab_server", "tabs"):
        vals = [p[part] / mb for p in per]
        print(f"per learner {part:<12} {sum(vals) / len(vals):.0f} MB mean, {max(vals):.0f} MB max")
    total = sum(sum(p.values()) for p in per) / mb
    print(f"per learner, in all      {total / n:.0f} MB ({total:.0f} MB for {n})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
