"""`ServiceRunner`: run requests through the machine's runner service, starting it on demand.

The `Runner` protocol as before (`run(request, on_event, cancel) -> RunResult`), so the app and
tests do not care. Where the service cannot be reached (no Unix sockets, it does not start, an
older protocol), the run goes to the fallback (`SubprocessRunner`): nothing breaks, it is only
slower. Cancel sends "cancel" on the connection; the service stops the worker (or takes the
run out of the queue) and answers with the cancelled result.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from lab.measure.result import RunResult

from .paths import clients_dir, lock_path, log_path, pid_path, socket_path, start_lock_path
from .proc import PROJECT_ROOT, code_stamp, worker_env
from .protocol import RunRequest
from .service import PROTO
from .stream import WorkerStream

OnEvent = Callable[[dict], None]
START_TIMEOUT_S = 20.0
CANCEL_WAIT_S = 5.0
# the client's settings a worker should see (import-time ones come from the service's own
# environment, since its workers are started ahead of need)
FORWARD_PREFIXES = ("MEMLAB_", "PYTORCH_", "TORCH_", "NCCL_", "HF_", "TRANSFORMERS_", "CUBLAS_")
log = logging.getLogger("lab.runner")


class ServiceUnavailable(RuntimeError):
    pass


def _try_connect(timeout: float = 5.0) -> socket.socket | None:
    if not hasattr(socket, "AF_UNIX"):
        raise ServiceUnavailable("this system has no Unix domain sockets")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(socket_path()))
    except OSError:
        s.close()
        return None
    s.settimeout(None)
    return s


def _service_alive() -> bool:
    """Someone holds the service's lock: a service runs (perhaps still binding its socket)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path()))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def start_service() -> None:
    """Start a detached service (its own session, output to its log) and return at once."""
    log_file = log_path()
    if log_file.exists() and log_file.stat().st_size > 1_000_000:
        os.replace(log_file, log_file.with_suffix(".log.1"))
    with open(log_file, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "lab.runner.daemon", "--detach"],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd="/",
                                start_new_session=True, env=worker_env(PROJECT_ROOT))
    proc.wait(timeout=30)  # the parent returns once the server has forked off


def connect(start: bool = True, timeout_s: float = START_TIMEOUT_S,
            on_start: Callable[[], None] | None = None) -> socket.socket:
    """A connection to the runner service; starts one when none answers and `start` (and then
    calls `on_start`: the caller started it)."""
    s = _try_connect()
    if s is not None or not start:
        if s is None:
            raise ServiceUnavailable("no runner service is running")
        return s
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(start_lock_path()), timeout=timeout_s):
            s = _try_connect()
            if s is not None:
                return s
            if not _service_alive():
                start_service()
                if on_start is not None:
                    on_start()
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                s = _try_connect()
                if s is not None:
                    return s
                time.sleep(0.02)
    except (Timeout, OSError, subprocess.SubprocessError) as e:
        raise ServiceUnavailable(f"the runner service did not start: {e}") from None
    raise ServiceUnavailable(f"the runner service did not answer within {timeout_s:g} s; "
                             f"see {log_path()}")


def ask(op: str, start: bool = False, **fields: Any) -> dict:
    """One-line request/answer ops: ping, state, shutdown."""
    with connect(start=start) as s:
        s.sendall((json.dumps({"op": op, **fields}) + "\n").encode())
        line = s.makefile("rb").readline()
    return json.loads(line) if line else {}


def stop_service(timeout_s: float = 10.0) -> bool:
    """Ask the service (if one runs) to stop, and wait until its process is gone. For tests and
    `memlab`; it stops running runs too. True when one was running."""
    pid = None
    try:
        pid = json.loads(pid_path().read_text())["pid"]
    except (OSError, ValueError, KeyError):
        pass
    try:
        ask("shutdown")
    except (ServiceUnavailable, OSError, ValueError):
        if pid is None:
            return False
    deadline = time.monotonic() + timeout_s
    while pid is not None and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid is not None and _alive(pid):
        os.kill(pid, 9)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited; it only waits to be reaped
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


APP_STARTED = "started-by-app"  # holds the pid of the service an app started


def _started_by_app(service_pid) -> bool:
    """The running service is the one an app started (not a `memlab run` in a shell)."""
    try:
        return (clients_dir() / APP_STARTED).read_text().strip() == str(service_pid)
    except OSError:
        return False


def _live_clients() -> list:
    """The other apps registered as using the service whose process still runs."""
    out = []
    for p in clients_dir().iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            if _alive(int(p.name)):
                out.append(p)
            else:
                p.unlink(missing_ok=True)  # an app that died without quitting
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def absolute(req: RunRequest) -> RunRequest:
    """The service's workers start elsewhere: paths in the request must not depend on our cwd."""
    import dataclasses

    def a(p: str | None) -> str | None:
        return os.path.abspath(p) if p else p

    return dataclasses.replace(req, experiment=a(req.experiment), profile_path=a(req.profile_path))


class ServiceRunner:
    parallel = 64  # runs a caller may have in flight: the service's queue decides what runs

    def __init__(self, fallback, python: str = sys.executable, start: bool = True):
        self.fallback = fallback
        self.python = python
        self.start = start
        self.fallback_reason: str | None = None  # why the last run did not use the service
        self.fallbacks = 0  # runs that went to the fallback
        # callers keep `parallel` runs in flight for the service's queue to sort out; without
        # the service nothing would: the fallback gets them as many at a time as it takes
        self._direct_slots = threading.BoundedSemaphore(max(1, getattr(fallback, "parallel", 1)))
        self.started_service = False  # this process started the service

    def _connect(self) -> socket.socket:
        started = []
        sock = connect(start=self.start, on_start=lambda: started.append(True))
        if started:  # an app started it: the last app to quit stops it (release)
            self.started_service = True
            try:  # its own word: the pid file may not be written yet
                (clients_dir() / APP_STARTED).write_text(str(ask("ping")["pid"]))
            except (ServiceUnavailable, OSError, ValueError, KeyError):
                pass
        return sock

    # ---- an app's lease on the service: quitting stops what an app started, unless shared ----
    def register(self) -> None:
        """This process (an app) uses the service: another app quitting leaves it running."""
        try:
            (clients_dir() / str(os.getpid())).touch()
        except OSError:
            pass

    def release(self, timeout_s: float = 10.0) -> str | None:
        """The app quits. A service an app started (this one, or another that has quit since)
        stops with the last app that uses it, when no run is in flight; otherwise one line,
        for the terminal, says that it stays, for whom, and for how long."""
        try:
            (clients_dir() / str(os.getpid())).unlink(missing_ok=True)
        except OSError:
            pass
        try:
            state = ask("state")
        except (ServiceUnavailable, OSError, ValueError):
            return None  # none runs (gone idle, or never started)
        users = [f"app {p.name}" for p in _live_clients()]
        runs = int(state.get("runs", 0)) + int(state.get("cpu_waiting", 0)) + sum(
            int(g.get("waiting", 0)) for g in state.get("gpus", []))
        if runs:
            users.append(f"{runs} run{'s' if runs != 1 else ''} in flight")
        by_app = _started_by_app(state.get("pid"))
        if by_app and not users:
            stop_service(timeout_s)
            (clients_dir() / APP_STARTED).unlink(missing_ok=True)
            return None
        whom = ", ".join(users) if users else "the shell that started it (memlab run)"
        idle = float(state.get("idle_s", 600))
        return (f"memlab: the runner service (pid {state.get('pid', '?')}) stays for {whom}; "
                f"it stops by itself after {_minutes(idle)} without a run")

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k.startswith(FORWARD_PREFIXES) and k != "CUDA_VISIBLE_DEVICES"}
        return {**env, **getattr(self.fallback, "extra_env", {})}

    def prestart(self) -> None:
        """Start the service (and its warm workers) now, before the first run needs them."""
        try:
            self._connect().close()
        except (ServiceUnavailable, OSError) as e:
            self.fallback_reason = str(e)

    def run(self, req: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        on_event = on_event or (lambda msg: None)
        try:
            sock = self._connect()
        except (ServiceUnavailable, OSError) as e:
            self.fallback_reason = str(e)
            log.info("runner service unavailable (%s): running the worker directly", e)
            return self._direct(req, on_event, cancel)
        with sock:
            msg = {"op": "run", "proto": PROTO, "request": absolute(req).to_json_dict(),
                   "python": self.python, "root": str(PROJECT_ROOT), "code": code_stamp(),
                   "env": self._env(),
                   "cwd": os.getcwd(), "client": f"pid:{os.getpid()}"}
            sock.sendall((json.dumps(msg) + "\n").encode())
            return self._follow(sock, req, on_event, cancel,
                                on_refused=lambda: self._direct(req, on_event, cancel))

    def _direct(self, req, on_event, cancel) -> RunResult:
        self.fallbacks += 1
        while not self._direct_slots.acquire(timeout=0.1):
            if cancel is not None and cancel.is_set():
                return WorkerStream(req).failed("cancelled", "cancelled while waiting for a worker slot")
        try:
            return self.fallback.run(req, on_event, cancel)
        finally:
            self._direct_slots.release()

    def _follow(self, sock, req, on_event, cancel, on_refused) -> RunResult:
        lines: queue.Queue = queue.Queue()

        def pump():
            try:
                for line in sock.makefile("rb"):
                    lines.put(line)
            except OSError:
                pass
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        give_up = None
        while True:
            if cancel is not None and cancel.is_set() and give_up is None:
                try:
                    sock.sendall(b"cancel\n")
                except OSError:
                    pass
                give_up = time.monotonic() + CANCEL_WAIT_S
            if give_up is not None and time.monotonic() > give_up:
                return WorkerStream(req).failed("cancelled", "cancelled by the user")
            try:
                line = lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                return WorkerStream(req).failed(
                    "error", f"the runner service stopped before the run ended (its log: {log_path()})")
            msg = json.loads(line)
            kind = msg.get("type")
            if kind == "_end":
                return RunResult.from_dict(msg["result"])
            if kind == "_refused":
                self.fallback_reason = msg.get("error")
                return on_refused()
            on_event(msg)
