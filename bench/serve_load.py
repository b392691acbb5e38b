"""Load on `memlab serve` over loopback: N learners, each in a browser tab's websocket, predict
the peak of lesson 01 and play back its H200 recording; then the server is killed (SIGKILL) and
started again.

    PYTHONPATH=. python bench/serve_load.py [--learners 30] [--hold 180] [--json FILE]

Prints (never asserted; tests/unit/test_serve_load.py asserts the outcomes with 5 learners):
  seconds            from the first connection to every learner seeing the recording
  key -> screen      with every learner connected, for `--hold` seconds: each presses Tab every
                     `--key-every` seconds or so (a learner reading; 1 s: a class mashing keys),
                     and the time from sending the key to the first screen bytes back on its
                     websocket is taken (p50, p95, max); a key with no answer within 5 s, a
                     refused or dropped socket, is an error
  server memory      the server process's RSS before the learners and with all of them
                     connected, and the difference per learner (the server's own cost)
  app memory         the RSS of the tab processes (one app per tab), in all and per learner
  after the kill     how many tab processes were left 30 s after the server died (0: each
                     followed its server, lab/serve/lifeline.py), and whether every learner's
                     progress (their prediction, the result they saw) is intact after the
                     restart, and still theirs (their signed cookie opens the lab again)

Loopback only, a temporary workshop folder, MEMLAB_RUNNER=direct (nothing here runs an
experiment: the recording is played back). Linux: processes are found through /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSON = "linear-baseline"
PREDICTION = "4"  # GB, typed into the predict box


# ---- the server and its processes ------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workshop: Path, home: Path, port: int, *args: str) -> subprocess.Popen:
    env = {**os.environ, "MEMLAB_HOME": str(home), "MEMLAB_RUNNER": "direct",
           "MEMLAB_TEST_STATE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("MEMLAB_SERVE_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--port", str(port),
                             "--data", str(workshop), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"memlab serve exited: {proc.stdout.read()}")
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("memlab serve did not listen within 60 s")


def app_processes(workshop: Path) -> list[int]:
    """Every running process whose environment names this workshop (the tabs' apps), found
    without the lab's own registry, so a leftover is seen however it came about."""
    marker = f"MEMLAB_CLASS={workshop}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0") \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def wait_gone(workshop: Path, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = app_processes(workshop)
        if not left:
            return []
        time.sleep(0.25)
    return app_processes(workshop)


def end_everything(proc: subprocess.Popen | None, workshop: Path) -> None:
    """Never leave a process behind, whatever happened."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in app_processes(workshop):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ---- one learner, as a browser tab would be -----------------------------------------------------------
def state(workshop: Path, name: str) -> dict:
    try:
        return json.loads((workshop / "learners" / name / "test-state.json").read_text())
    except (OSError, ValueError):
        return {}


async def until(workshop: Path, name: str, check, what: str, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    last: dict = {}
    while time.monotonic() < deadline:
        last = state(workshop, name)
        if last and check(last):
            return last
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{name}: never showed {what} within {timeout_s:g} s (last: "
                       f"{ {k: last.get(k) for k in ('screen', 'lesson', 'running')} })")


KEY_TIMEOUT_S = 5.0
TAB = "\t"  # moves the focus: the screen always answers with a redraw


class Learner:
    """A tab: the name form (a POST), then the websocket textual-serve's page would open."""

    def __init__(self, base: str, workshop: Path, name: str):
        self.base, self.workshop, self.name = base, workshop, name
        self.session = None
        self.ws = None
        self.reader = None
        self.received = 0
        self.cookie = ""
        self.answered = asyncio.Event()  # screen bytes came since the last key
        self.latencies: list[float] = []
        self.errors = 0

    async def connect(self) -> None:
        import aiohttp

        self.session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        async with self.session.post(f"{self.base}/learner", data={"name": self.name},
                                     allow_redirects=False) as resp:
            if resp.status != 303:
                raise RuntimeError(f"{self.name}: the name form answered {resp.status}")
            self.cookie = resp.cookies["memlab_learner"].value
        self.ws = await self.session.ws_connect(f"{self.base}/ws?width=100&height=30",
                                                heartbeat=None)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.data is not None and not isinstance(msg.data, int):
                self.received += len(msg.data)
                if isinstance(msg.data, bytes):  # the terminal's bytes (text frames: pong, ...)
                    self.answered.set()
        self.errors += 1  # the socket closed under a connected learner

    async def hold(self, seconds: float, rng, every_s: float = 1.0) -> None:
        """Press Tab about every `every_s` seconds for `seconds`, timing each key's answer."""
        end = time.monotonic() + seconds
        await asyncio.sleep(rng.uniform(0, every_s))  # not all in step
        while time.monotonic() < end:
            await asyncio.sleep(0.3)  # let the last redraw's tail arrive first
            self.answered.clear()
            t = time.monotonic()
            try:
                await self.ws.send_json(["stdin", TAB])
                await asyncio.wait_for(self.answered.wait(), KEY_TIMEOUT_S)
                self.latencies.append(time.monotonic() - t)
            except (asyncio.TimeoutError, ConnectionError, RuntimeError):
                self.errors += 1
            await asyncio.sleep(rng.uniform(0.4, 0.9) * every_s)

    async def keys(self, *keys: str) -> None:
        for key in keys:
            await self.ws.send_json(["stdin", key])
            await asyncio.sleep(0.05)

    async def predict_and_play(self, timeout_s: float) -> dict:
        ws_name, w = self.name, self.workshop
        await until(w, ws_name, lambda s: s["screen"] == "HomeScreen", "the course map", timeout_s)
        await self.keys("\r")  # lesson 01, the first row of the course map
        await until(w, ws_name, lambda s: s["lesson"] == LESSON, "lesson 01", timeout_s)
        await self.keys("r")  # play it: the prediction comes first
        await until(w, ws_name, lambda s: s["screen"] == "PredictScreen", "the predict box",
                    timeout_s)
        await self.keys(*PREDICTION, "\r")
        return await until(w, ws_name, lambda s: s["results"] and not s["running"]
                           and s["screen"] != "PredictScreen", "the recording", timeout_s)

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.session is not None:
            await self.session.close()


def progress_of(workshop: Path, name: str) -> dict:
    """What the learner's progress file says about lesson 01 (read only: the class view's
    parser, which never repairs)."""
    from lab.course.progress import parse

    try:
        text = (workshop / "learners" / name / "progress.jsonl").read_text()
    except OSError:
        return {"readable": False}
    state_, bad = parse(text)
    lp = state_.lessons.get(LESSON)
    return {"readable": True, "damaged_lines": bad,
            "prediction_gb": None if lp is None else lp.prediction_gb,
            "revealed": bool(lp and lp.revealed_at)}


# ---- the whole run ----------------------------------------------------------------------------------------
def percentile(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


async def run_load(n: int, work: Path, timeout_s: float = 300, hold_s: float = 0,
                   key_every_s: float = 1.0) -> dict:
    workshop, home = work / "workshop", work / "home"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    names = [f"learner-{i:02d}" for i in range(n)]
    report: dict = {"learners": n}
    proc = start_server(workshop, home, port)
    learners: list[Learner] = []
    try:
        report["server_rss_idle"] = rss_bytes(proc.pid)
        t0 = time.monotonic()
        learners = [Learner(base, workshop, name) for name in names]
        for lr in learners:  # a class arriving: one tab after another, quickly
            await lr.connect()
            await asyncio.sleep(0.1)
        seen = await asyncio.gather(*(lr.predict_and_play(timeout_s) for lr in learners))
        report["seconds_to_all_played"] = round(time.monotonic() - t0, 1)
        report["recordings_seen"] = sum(bool(s["results"]) for s in seen)
        if hold_s:
            import random

            rng = random.Random(34)
            await asyncio.gather(*(lr.hold(hold_s, rng, key_every_s) for lr in learners))
            lat = [x for lr in learners for x in lr.latencies]
            report["hold_s"], report["key_every_s"] = hold_s, key_every_s
            report["keys"] = len(lat)
            report["key_errors"] = sum(lr.errors for lr in learners)
            report["key_ms"] = {q: round(1e3 * percentile(lat, p), 1) if lat else None
                                for q, p in (("p50", 0.5), ("p95", 0.95), ("max", 1.0))}
        apps = app_processes(workshop)
        report["app_processes"] = len(apps)
        report["server_rss_loaded"] = rss_bytes(proc.pid)
        report["apps_rss"] = sum(rss_bytes(pid) for pid in apps)
        # the server dies with every tab connected
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = time.monotonic()
        report["left_after_kill"] = len(wait_gone(workshop, 30))
        report["seconds_until_tabs_gone"] = round(time.monotonic() - killed_at, 1)
        cookies = {lr.name: lr.cookie for lr in learners}  # what each browser kept
        for lr in learners:
            await lr.close()
        learners = []
        report["progress_after_kill"] = {name: progress_of(workshop, name) for name in names}
        # started again: every learner is still signed in, with the progress they had
        proc = start_server(workshop, home, port)
        import aiohttp

        signed_in = 0
        async with aiohttp.ClientSession() as session:
            for name in names:
                cookie = f"memlab_learner={cookies[name]}"
                async with session.get(f"{base}/", headers={"Cookie": cookie}) as resp:
                    signed_in += "textual.js" in await resp.text()
        report["signed_in_after_restart"] = signed_in
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        report["restart_output"] = out
        report["left_at_end"] = len(wait_gone(workshop, 30))
        report["intact"] = sum(p.get("prediction_gb") == float(PREDICTION) and p["revealed"]
                               and p["damaged_lines"] == 0
                               for p in report["progress_after_kill"].values())
        return report
    finally:
        for lr in learners:
            await lr.close()
        end_everything(proc, workshop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per step")
    parser.add_argument("--hold", type=float, default=60,
                        help="seconds every learner stays, pressing keys (default 60)")
    parser.add_argument("--key-every", type=float, default=1.0, metavar="S",
                        help="about how often each learner presses a key while it stays (default 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memlab-serve-load-") as tmp:
        report = asyncio.run(run_load(args.learners, Path(tmp), args.timeout, args.hold,
                                      args.key_every))
    n = report["learners"]
    mb = 1e6
    print(f"learners                     {n} (loopback, one app process per tab)")
    print(f"all played the recording in  {report['seconds_to_all_played']} s "
          f"({report['recordings_seen']}/{n} saw it)")
    if report.get("hold_s"):
        k = report["key_ms"]
        print(f"key -> screen                {report['keys']} keys in {report['hold_s']:g} s (one "
              f"per learner every ~{report['key_every_s']:g} s): p50 "
              f"{k['p50']} ms, p95 {k['p95']} ms, max {k['max']} ms; "
              f"{report['key_errors']} error(s)")
    print(f"server RSS                   {report['server_rss_idle'] / mb:.1f} MB idle, "
          f"{report['server_rss_loaded'] / mb:.1f} MB with {n} learners: "
          f"{(report['server_rss_loaded'] - report['server_rss_idle']) / n / mb:.2f} MB per learner")
    print(f"tab apps RSS                 {report['apps_rss'] / mb:.0f} MB in "
          f"{report['app_processes']} processes: {report['apps_rss'] / n / mb:.1f} MB per learner")
    print(f"after SIGKILL of the server  {report['left_after_kill']} tab process(es) left "
          f"(all gone {report['seconds_until_tabs_gone']} s after the kill)")
    print(f"progress intact              {report['intact']}/{n} (prediction and result kept, "
          f"no damaged line)")
    print(f"signed in after the restart  {report['signed_in_after_restart']}/{n}")
    print(f"processes left at the end    {report['left_at_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps({k: v for k, v in report.items()
                                               if k != "restart_output"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
