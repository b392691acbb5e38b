"""A zygote: one process that imports what a worker needs once, then forks ready workers.

A warm worker is a fresh Python importing torch, transformers and the lab's measure code: ~5 s
of a core on a 2-core laptop, paid again for every variant, since workers are used once. When
sim runs two variants at once on two cores, those imports also take a core from a run. A zygote
pays them once per pool key (Python, checkout, code, GPU) and then forks: a fork of the
imported process is ready in milliseconds, and is still a fresh process for its run (a pid and
a session of its own, and no state from any run, since the zygote never runs one).

    python -m lab.runner.zygote FD      (started fork+exec by the service's pool, like a worker)

The zygote is single-threaded and never touches CUDA (forking after either is unsafe); the pool
starts zygotes only for sim and cpu runs (lab.runner.pool). It
serves one Unix socket, FD: for each byte the pool sends with three pipe ends attached
(SCM_RIGHTS: the new worker's stdin, stdout, stderr) it forks a child that makes a session of
its own, takes the pipes as fds 0-2 and runs the worker's warm path (says "ready", reads ONE
request). It answers JSON lines: {"type": "ready"} once imported, {"pid": N} for each fork, in
order, and {"exit": N, "code": C} when it reaps child N: being their parent, only it can read
their exit codes. It leaves when the socket closes; its children run on.

`Zygote` (the pool's handle) and `ForkedWorker` (a worker it forked, with `WorkerProc`'s
interface) live here too; they import nothing heavy.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from .proc import KILL_GRACE_S, PROJECT_ROOT, WorkerStreams, kill_group, worker_env

FORK_ANSWER_S = 10.0  # a fork of an idle process: milliseconds; past this the zygote is stuck


class ZygoteGone(RuntimeError):
    """The zygote died or stopped answering: the pool starts workers the cold way."""


# ---- the pool's side ----------------------------------------------------------------------------
class Zygote:
    """A zygote process and its socket; `fork()` hands out a `ForkedWorker`."""

    def __init__(self, python: str = sys.executable, root: str = str(PROJECT_ROOT),
                 env: dict[str, str] | None = None, stderr=subprocess.DEVNULL):
        """`stderr`: where the zygote's own messages go (a test keeps them, to say why one
        died); its workers' stderr is theirs, through the pipes each fork gets."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # torch.cuda.is_available() by NVML, not by initialising the driver, which would leave
        # CUDA unusable in every fork (PyTorch's own switch for this); the pool gives zygotes
        # only to sim and cpu runs anyway
        env = {**(env or {}), "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
        self.proc = subprocess.Popen(
            [python, "-m", "lab.runner.zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr, start_new_session=True, env=worker_env(root, env))
        theirs.close()
        self.pid = self.proc.pid
        self.sock = mine
        self.ready = threading.Event()
        self.gone = threading.Event()
        self._pids: queue.Queue = queue.Queue()
        self._fork_lock = threading.Lock()
        self._children: dict[int, ForkedWorker] = {}
        self._early_exits: dict[int, int] = {}  # reaped before its ForkedWorker was known
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name="memlab-zygote").start()

    def alive(self) -> bool:
        return not self.gone.is_set() and self.proc.poll() is None

    def _read(self) -> None:
        try:
            for raw in self.sock.makefile("rb"):
                msg = json.loads(raw)
                if msg.get("type") == "ready":
                    self.ready.set()
                elif "pid" in msg:
                    self._pids.put(int(msg["pid"]))
                elif "exit" in msg:
                    self._exited(int(msg["exit"]), int(msg["code"]))
        except (OSError, ValueError):
            pass
        self.gone.set()
        self._pids.put(None)  # wakes a fork() waiting for its answer
        with self._lock:
            orphans = list(self._children.values())
        for w in orphans:  # their exit codes are lost with the zygote: watch the pids instead
            w.orphaned()

    def _exited(self, pid: int, code: int) -> None:
        with self._lock:
            w = self._children.pop(pid, None)
            if w is None:
                self._early_exits[pid] = code
        if w is not None:
            w.exited(code)

    def fork(self) -> ForkedWorker:
        """A new worker, forked from the imported zygote; ZygoteGone if it cannot be."""
        if not self.ready.is_set() or not self.alive():
            raise ZygoteGone("the zygote is not ready")
        fds = [os.pipe() for _ in range(3)]  # (read, write) each: stdin, stdout, stderr
        theirs = [fds[0][0], fds[1][1], fds[2][1]]
        try:
            with self._fork_lock:  # the answers come in the order of the requests
                try:
                    socket.send_fds(self.sock, [b"F"], theirs)
                except OSError as e:
                    raise ZygoteGone(f"the zygote went away: {e}") from None
                try:
                    pid = self._pids.get(timeout=FORK_ANSWER_S)
                except queue.Empty:
                    self.kill()  # stuck: nothing it says later can be matched to a request
                    pid = None
            if pid is None:
                raise ZygoteGone("the zygote did not fork")
        except BaseException:
            for fd in (fds[0][1], fds[1][0], fds[2][0]):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        w = ForkedWorker(pid, fds[0][1], fds[1][0], fds[2][0])
        with self._lock:
            code = self._early_exits.pop(pid, None)
            if code is None:
                self._children[pid] = w
        if code is not None:
            w.exited(code)
        return w

    def kill(self) -> None:
        """Stop the zygote (its group is itself alone: the workers it forked run on)."""
        self.gone.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        kill_group(self.proc)
        self.sock.close()


class ForkedWorker(WorkerStreams):
    """A worker forked by a zygote: `WorkerProc`'s interface over pipes and a pid. It is not our
    child, so its end is heard from the zygote (`exited`), or, if the zygote is gone, seen when
    the pid no longer answers."""

    warm = True

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int, stderr_fd: int):
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()
        self._orphaned = False
        super().__init__(os.fdopen(stdin_fd, "w", encoding="utf-8"),
                         os.fdopen(stdout_fd, encoding="utf-8", errors="replace"),
                         os.fdopen(stderr_fd, encoding="utf-8", errors="replace"))

    def exited(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    def orphaned(self) -> None:
        self._orphaned = True

    def alive(self) -> bool:
        if self._exited.is_set():
            return False
        if self._orphaned:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self._exited.set()
                return False
            except PermissionError:
                pass
        return True

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            self._exited.wait(0.02)
        return True

    def finish(self, timeout: float = 2.0) -> int | None:
        self._wait(timeout)
        self._err.join(timeout=1)
        self.kill()
        return self.returncode

    def kill(self) -> None:
        for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 1.0)):
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            if self._wait(wait):
                try:  # anything it started in its session
                    os.killpg(self.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                break
        self.close_stdin()


# ---- the zygote's side ----------------------------------------------------------------------------
def _say(sock: socket.socket, msg: dict) -> None:
    sock.sendall((json.dumps(msg) + "\n").encode())


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _say(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _become_worker(fds: list[int], close: list[int]) -> None:
    """In the forked child: a worker of its own, as if started with `--warm` (never returns)."""
    code = 1
    try:
        os.setsid()  # its own session: the pool stops it and what it starts with one killpg
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        import random

        random.seed()  # a fresh process would not share the zygote's state
        from lab.runner import worker

        code = worker.main(["--warm"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve(sock: socket.socket) -> None:
    from lab.runner.worker import warm_up

    warm_up(sim=True)
    import gc

    gc.freeze()  # the imported objects stay out of the children's collections: fewer pages copied
    if threading.active_count() > 1:  # an import started a thread: forking is not safe
        raise SystemExit("memlab zygote: a thread is running after the imports; not forking")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through wake_w
    _say(sock, {"type": "ready", "pid": os.getpid()})
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(sock)
        if sock not in readable:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, 1, 3)
        if not msg:
            return  # the pool closed its end: leave (the workers run on)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            _become_worker(fds, [sock.fileno(), wake_r, wake_w])
        for fd in fds:
            os.close(fd)
        _say(sock, {"pid": pid})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sock = socket.socket(fileno=int(argv[0]))
    try:
        serve(sock)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the pool went away
    return 0


if __name__ == "__main__":
    sys.exit(main())
