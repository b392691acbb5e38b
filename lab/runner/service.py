"""The runner service: one per user and machine, shared by the app, the CLI and served labs.

The process around it (lock, socket, detaching, idle exit) is `lab.runner.daemon`. The service
owns the warm worker pool and the machine's admission (a fair queue per GPU, CPU runs by
cores). Torch-free: it never imports torch, never touches CUDA, and spawns workers with
fork+exec only.

One connection, one JSON line in: {"op": "run", "proto", "request", "python", "root", "code",
"env", "client"} | {"op": "ping"} | {"op": "state"} | {"op": "shutdown"}. For a run the service answers
with events (its own "status" ones, then the worker's lines) and ends with
{"type": "_end", "result": RunResult}; a line "cancel" from the client, or the client going
away, cancels the run (waiting or running).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time

from lab.measure.modes import MODE_INFO

from .admission import Admission
from .gpu_turns import TURNS_ENV, turns_path
from .group import check_request, drive, free_port, rank_env
from .paths import runtime_dir
from .peaks import need_for
from .pool import PoolKey, WarmPool
from .proc import PROJECT_ROOT
from .protocol import RunRequest, status
from .stream import WorkerStream

PROTO = 1
IDLE_ENV, SPARES_ENV = "MEMLAB_RUNNER_IDLE_S", "MEMLAB_RUNNER_SPARES"
log = logging.getLogger("lab.runner.service")


class Outbox:
    """Lines to one client, written by a thread of their own so a slow reader never stalls the
    worker's pipe; when the backlog grows, samples (~10/s, only for the live view) are dropped."""

    def __init__(self, conn: socket.socket, broken: threading.Event):
        self.conn, self.broken = conn, broken
        self.cond = threading.Condition()
        self.items: list[bytes | None] = []
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def send(self, msg: dict) -> None:
        with self.cond:
            if msg.get("type") == "sample" and len(self.items) > 200:
                return
            self.items.append((json.dumps(msg, separators=(",", ":")) + "\n").encode())
            self.cond.notify()

    def close(self, timeout: float = 30.0) -> None:
        with self.cond:
            self.items.append(None)
            self.cond.notify()
        self.thread.join(timeout)

    def _write(self) -> None:
        while True:
            with self.cond:
                while not self.items:
                    self.cond.wait()
                item = self.items.pop(0)
            if item is None:
                return
            try:
                self.conn.sendall(item)
            except OSError:
                self.broken.set()  # the client is gone: its run is cancelled


class Service:
    def __init__(self, admission: Admission, gpu_ids: list[str], pool: WarmPool,
                 idle_s: float = 600.0):
        self.admission, self.gpu_ids, self.pool, self.idle_s = admission, gpu_ids, pool, idle_s
        self.stopping = threading.Event()
        self.runs: set[threading.Event] = set()  # cancel events of runs in progress
        self.last_activity = time.monotonic()
        self._lock = threading.Lock()

    # ---- connections ------------------------------------------------------------------------
    def serve(self, server: socket.socket) -> None:
        server.settimeout(0.5)
        while not self.stopping.is_set():
            try:
                conn, _ = server.accept()
            except socket.timeout:
                with self._lock:
                    idle = not self.runs and time.monotonic() - self.last_activity > self.idle_s
                if idle:
                    log.info("idle for %.0f s: stopping", self.idle_s)
                    break
                self.pool.forget_idle_keys()
                self.pool.top_up()  # spares deferred while every core was busy
                continue
            except OSError:
                break
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        self.stop()

    def stop(self, wait_s: float = 10.0) -> None:
        """Cancel every run (their workers are killed) and wait for them, then the spares."""
        self.stopping.set()
        with self._lock:
            for cancel in self.runs:
                cancel.set()
        deadline = time.monotonic() + wait_s
        while self.runs and time.monotonic() < deadline:
            time.sleep(0.02)
        self.pool.close()

    def _handle(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            self._serve_one(conn, reader)
        except OSError:
            pass  # the client went away
        finally:
            try:  # wakes the thread watching this client for "cancel"
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            reader.close()
            conn.close()

    def _serve_one(self, conn: socket.socket, reader) -> None:
        try:
            conn.settimeout(10)
            msg = json.loads(reader.readline() or b"{}")
            conn.settimeout(None)
        except (OSError, ValueError):
            return
        op = msg.get("op")
        with self._lock:
            self.last_activity = time.monotonic()
        if op == "ping":
            conn.sendall(_line({"type": "pong", "pid": os.getpid(), "proto": PROTO}))
        elif op == "state":
            with self._lock:
                runs = len(self.runs)
            conn.sendall(_line({"type": "state", "pid": os.getpid(), "proto": PROTO,
                                **self.admission.state(), "pool": self.pool.count(),
                                "runs": runs, "idle_s": self.idle_s}))
        elif op == "shutdown":
            self.stop()
            conn.sendall(_line({"type": "bye"}))
        elif op == "run" and msg.get("proto") == PROTO:
            mode = (msg.get("request") or {}).get("mode")
            if mode in MODE_INFO and MODE_INFO[mode].on_gpu and not self.gpu_ids:
                # our GPU probe found none; the client's own torch may know better: let it run
                # the worker itself rather than fail the run here
                conn.sendall(_line({"type": "_refused", "proto": PROTO,
                                    "error": "the runner service sees no GPU (nvidia-smi)"}))
                return
            self._run(conn, reader, msg)
        else:
            conn.sendall(_line({"type": "_refused", "proto": PROTO,
                                "error": f"unknown op {op!r} or protocol {msg.get('proto')!r}"}))

    def _run(self, conn: socket.socket, reader, msg: dict) -> None:
        cancel = threading.Event()
        out = Outbox(conn, cancel)
        threading.Thread(target=_watch_client, args=(reader, cancel), daemon=True).start()
        with self._lock:
            self.runs.add(cancel)
        try:
            req = RunRequest.from_json_dict(msg["request"])
            result = self._admit_and_run(req, msg, out, cancel)
        except Exception as e:  # a bug here must not take the service (and every run) down
            log.exception("run failed")
            try:
                req = RunRequest.from_json_dict(msg.get("request"))
            except ValueError:  # the request itself was the problem
                req = RunRequest("?", "?")
            result = WorkerStream(req).failed("error", f"the runner service failed: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self.runs.discard(cancel)
                self.last_activity = time.monotonic()
        log.info("%s %s %s/%s ranks=%d: %s", result.lesson, result.variant, result.mode,
                 result.scale, req.ranks, result.status)
        out.send({"type": "_end", "result": result.to_dict()})
        out.close()

    def _admit_and_run(self, req: RunRequest, msg: dict, out: Outbox, cancel: threading.Event):
        problem = check_request(req)
        if problem:
            return WorkerStream(req).failed("error", problem)
        try:
            ticket = self.admission.submit(need_for(req), client=str(msg.get("client", "")))
        except ValueError as e:
            return WorkerStream(req).failed("error", str(e))
        try:
            admitted = self.admission.wait(
                ticket, cancel, on_wait=lambda text, ahead: out.send(status("waiting", text, ahead=ahead)))
            if not admitted:
                return WorkerStream(req).failed("cancelled", "cancelled while waiting in the queue")
            env = {k: str(v) for k, v in (msg.get("env") or {}).items() if k != "CUDA_VISIBLE_DEVICES"}
            workers: list = []
            try:
                self._start_ranks(req, msg, ticket, env, out, workers)
            except Exception:
                for w in workers:  # started for a run that cannot go on
                    w.kill()
                raise
            return drive(workers, req, out.send, cancel)
        finally:
            self.admission.release(ticket)
            self.pool.top_up()  # a core is free again: spares deferred until now may start

    def _start_ranks(self, req: RunRequest, msg: dict, ticket, env: dict[str, str], out: Outbox,
                     workers: list) -> None:
        """One worker per rank from the pool (its GPU's key), each given the request."""
        python = msg.get("python") or sys.executable
        root = msg.get("root") or str(PROJECT_ROOT)
        port = free_port() if req.ranks > 1 else 0
        for r in range(req.ranks):
            gpu = self.gpu_ids[ticket.gpus[r]] if req.mode_info.on_gpu else None
            key = PoolKey(python, root, gpu, str(msg.get("code") or ""))
            where = f" on GPU {ticket.gpus[r]}" if gpu is not None else ""
            who = f"rank {r}: " if req.ranks > 1 else ""
            warm = self.pool.ready_for(key)  # said before take(), which may wait for the imports
            out.send(status("starting", f"{who}worker ready{where}" if warm else
                            f"{who}starting a worker{where} (importing torch)", warm=warm))
            w = self.pool.take(key)
            workers.append(w)
            w.send(req.to_json_dict(), {**env, **(rank_env(r, req.ranks, port) if req.ranks > 1 else {}),
                                        **self._turns_env(req, ticket, r)}, msg.get("cwd"))

    def _turns_env(self, req: RunRequest, ticket, rank: int) -> dict[str, str]:
        """Rank 0 of a CUDA run takes the turns of every GPU of the run (lab.runner.gpu_turns)."""
        if not req.mode_info.on_gpu or rank != 0:
            return {TURNS_ENV: ""}
        paths = [str(turns_path(runtime_dir(), self.gpu_ids[g])) for g in ticket.gpus]
        return {TURNS_ENV: os.pathsep.join(paths)}


def _line(msg: dict) -> bytes:
    return (json.dumps(msg) + "\n").encode()


def _watch_client(reader, cancel: threading.Event) -> None:
    """A "cancel" line, or the client going away (EOF, reset), cancels its run."""
    try:
        for raw in reader:
            if raw.strip() == b"cancel":
                break
        # EOF: the client closed its end
    except (OSError, ValueError):
        pass
    cancel.set()
