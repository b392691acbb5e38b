"""`WorkerProc`: one `python -m lab.runner.worker` process, its pipes and its process group.

Cold: the request is on the command line and the worker imports what it needs. Warm: started
ahead of need with `--warm`, it imports torch, transformers and the lab's measure code, says
`{"type": "ready"}` and blocks reading ONE request on stdin; it is used once. Either way the
worker is a fresh process (its own CUDA context and allocator) in its own session, so one
`killpg` stops it and anything it started (DataLoader workers, compilers, a grandchild).

The service spawns by fork+exec (subprocess), never a bare fork: it is threaded. Only a
zygote (lab.runner.zygote: single-threaded, imported, no CUDA) forks workers bare.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

KILL_GRACE_S = 0.5
STDERR_TAIL_LINES = 20
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def code_stamp(root: Path = PROJECT_ROOT) -> str:
    """What a warm worker's imports depend on: the newest modification time and the number of
    the `lab` package's .py files under `root`. A worker started before an edit or an upgrade
    (same Python, same checkout) has another stamp, so the pool never hands it a run: it would
    run the old code. A few hundred stat() calls, ~1 ms."""
    newest, count = 0, 0
    for path in (root / "lab").rglob("*.py"):
        try:
            newest = max(newest, path.stat().st_mtime_ns)
        except OSError:  # removed while we looked
            continue
        count += 1
    return f"{newest}:{count}"
# every worker, every rank: NVLink SHARP (multicast) stays off on the lent H200 machines
DIST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


def worker_env(root: str | Path = PROJECT_ROOT, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **DIST_ENV, **(extra or {})}
    # the worker must import this very `lab`, also when run from a source checkout
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the worker's process group, then SIGKILL what is left after a short grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            # the leader is gone; make sure no child of it survives either
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        except subprocess.TimeoutExpired:
            continue


class WorkerStreams:
    """A worker's pipes and two pump threads: protocol lines go to `lines`, stderr to a short
    tail. `WorkerProc` (a process we started) and `ForkedWorker` (forked by a zygote,
    lab.runner.zygote) add how the process is watched and stopped."""

    warm = True
    pid: int

    def __init__(self, stdin, stdout, stderr):
        self.stdin, self._stdout, self._stderr = stdin, stdout, stderr
        self.lines: queue.Queue = queue.Queue()  # str lines, then None at EOF
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.ready = threading.Event()  # warm: imports done, waiting for its request
        self.used = not self.warm
        self._err = threading.Thread(target=self._pump_stderr, daemon=True)
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        self._err.start()

    def _pump_stdout(self) -> None:
        for line in self._stdout:
            if not self.ready.is_set() and line.startswith('{"type":"ready"'):
                self.ready.set()
                continue
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        for line in self._stderr:
            self.stderr_tail.append(line.rstrip())

    def send(self, request: dict, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        """Give a warm worker its one request (its environment: rank variables, the client's
        settings; the client's working directory)."""
        self.used = True
        try:
            msg = {"request": request, "env": env or {}, "cwd": cwd}
            self.stdin.write(json.dumps(msg) + "\n")
            self.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # it died while warming up: its stdout ends without a result, and that is reported

    def close_stdin(self) -> None:
        try:  # the pump threads close stdout and stderr when they reach EOF
            if self.stdin is not None:
                self.stdin.close()
        except OSError:
            pass


class WorkerProc(WorkerStreams):
    """A worker process we started (fork+exec)."""

    def __init__(self, python: str = sys.executable, root: str | Path = PROJECT_ROOT,
                 env: dict[str, str] | None = None, request: dict | None = None):
        argv = [python, "-m", "lab.runner.worker"]
        argv += [json.dumps(request)] if request is not None else ["--warm"]
        self.warm = request is None
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if self.warm else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env=worker_env(root, env), text=True, encoding="utf-8", errors="replace")
        self.pid = self.proc.pid
        super().__init__(self.proc.stdin, self.proc.stdout, self.proc.stderr)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finish(self, timeout: float = 2.0) -> int | None:
        """After its stdout ended: the exit code (killing it if it lingers), stderr drained."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        self._err.join(timeout=1)
        self.kill()  # anything the worker left behind in its group
        return code if code is not None else self.proc.returncode

    def kill(self) -> None:
        kill_group(self.proc)
        self.close_stdin()
