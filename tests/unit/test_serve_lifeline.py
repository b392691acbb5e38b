"""A tab's app lives only as long as its server (lab/serve/lifeline.py): it exits when the server
dies (test_serve_load.py kills a real one under five learners), and a server that starts ends
the apps a killed predecessor left running, never a process that is not one of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.serve import lifeline

if not Path("/proc/self/stat").exists():
    pytest.skip("process start times come from /proc (Linux)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _registered_app(workshop: Path, server_pid: int) -> subprocess.Popen:
    """A process that registers as a tab of `server_pid` and then idles (as a leftover would)."""
    code = ("import sys, time; from pathlib import Path; from lab.serve.lifeline import register; "
            "register(Path(sys.argv[1]), int(sys.argv[2])); print('up', flush=True); "
            "time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(workshop), str(server_pid)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "up"
    return proc


def test_a_new_server_ends_the_apps_of_a_dead_one_and_only_those(tmp_path):
    leftover = _registered_app(tmp_path, _dead_pid())
    current = _registered_app(tmp_path, os.getpid())  # its server (this process) still runs
    stale = tmp_path / lifeline.TABS_DIR / f"{_dead_pid()}.json"  # an app that ended unseen
    stale.write_text(json.dumps({"pid": int(stale.stem), "start": "1", "server_pid": 1}))
    try:
        assert lifeline.reap(tmp_path, grace_s=10) == 1
        assert leftover.wait(timeout=10) == -15  # SIGTERM
        assert current.poll() is None
        assert not stale.exists()
        assert sorted(p.name for p in (tmp_path / lifeline.TABS_DIR).iterdir()) \
            == [f"{current.pid}.json"]
    finally:
        for proc in (leftover, current):
            proc.kill()
            proc.wait()


def test_a_pid_given_to_another_process_since_is_never_signalled(tmp_path):
    # Given a registry entry whose pid runs, but with another start time (the pid was reused)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        entry = tmp_path / lifeline.TABS_DIR / f"{other.pid}.json"
        entry.parent.mkdir()
        entry.write_text(json.dumps({"pid": other.pid, "start": "0", "server_pid": _dead_pid()}))
        assert lifeline.reap(tmp_path, grace_s=1) == 0
        assert other.poll() is None and not entry.exists()
    finally:
        other.kill()
        other.wait()


async def test_the_server_reaps_at_start_and_says_so(tmp_path):
    pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")
    from lab.serve.server import LabServer

    leftover = _registered_app(tmp_path, _dead_pid())
    said = []
    try:
        await LabServer(tmp_path, say=said.append).on_startup(None)
        assert leftover.wait(timeout=10) == -15
        assert "ended 1 app process(es) that a killed server left running" in said
    finally:
        leftover.kill()
        leftover.wait()


@pytest.mark.parametrize("wait_for_child", [True, False])
def test_an_app_whose_server_dies_exits(tmp_path, wait_for_child):
    # Given a "server" that starts an app following it, then dies by SIGKILL: once the app
    # follows (the kernel's parent-death signal), or before it got that far (its own check)
    app = ("import sys, time; from lab.serve.lifeline import follow_server; "
           "follow_server(int(sys.argv[1])); print('following', flush=True); time.sleep(600)")
    server = ("import os, subprocess, sys; child = subprocess.Popen([sys.executable, '-c', "
              f"{app!r}, str(os.getpid())], stdout=subprocess.PIPE, text=True); "
              f"{'child.stdout.readline(); ' if wait_for_child else ''}"
              "print(child.pid, flush=True); os.kill(os.getpid(), 9)")
    done = subprocess.run([sys.executable, "-c", server], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    child = int(done.stdout.split()[0])
    # Then the app ends on its own
    for _ in range(300):
        if not lifeline.alive(child):
            break
        time.sleep(0.1)
    still_running = lifeline.alive(child)
    if still_running:
        os.kill(child, 9)
    assert not still_running
