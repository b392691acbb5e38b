"""The runner service's process: `python -m lab.runner.daemon [--detach] [--idle S] [--spares N]`.

Started on demand by `remote.connect()` (detached: its own session, its output in a log in the
state dir), found through its Unix socket in the per-user runtime dir. It holds a file lock
(filelock) for its whole life, so a second one exits at once, and it goes away after `--idle`
seconds without a run (MEMLAB_RUNNER_IDLE_S), stopping its spare workers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys

from .admission import Admission, usable_cores
from .paths import lock_path, pid_path, socket_path
from .pool import PoolKey, WarmPool
from .proc import PROJECT_ROOT, code_stamp
from .service import IDLE_ENV, PROTO, SPARES_ENV, Service, log


def _detach() -> None:
    """Leave the client that started us: it waits for this parent, the child serves on."""
    if os.fork():
        os._exit(0)
    try:
        os.setsid()  # our own session: the client's terminal closing does not reach us
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.runner.daemon")
    p.add_argument("--detach", action="store_true", help="fork into the background")
    p.add_argument("--idle", type=float, default=float(os.environ.get(IDLE_ENV, 600)),
                   help="stop after this many seconds without a run")
    p.add_argument("--spares", type=int, default=None, help="warm workers kept ready per key")
    args = p.parse_args(argv)
    if args.detach:
        _detach()  # single-threaded here, no CUDA: a plain fork is safe
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s runner[{os.getpid()}] %(levelname)s %(message)s")
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path()))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.info("another runner service holds %s: exiting", lock_path())
        return 0
    try:
        return _serve(args)
    finally:
        lock.release()


def _serve(args) -> int:
    from .gpus import visible_gpus

    path = socket_path()
    if path.exists() or path.is_symlink():
        path.unlink()  # we hold the lock: whatever answered there before is gone
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o600)
    server.listen(64)
    gpus = visible_gpus()
    cores = usable_cores()
    # ~340 MB of memory each (torch + transformers imported); 3 covers most lessons' variants
    spares = args.spares if args.spares is not None else int(
        os.environ.get(SPARES_ENV, 3 if cores <= 4 else 4))
    admission = Admission([g.total_bytes for g in gpus], cores)
    pool = WarmPool(spares, may_spawn=lambda: admission.cores_used < admission.cores)
    service = Service(admission, [g.visible for g in gpus], pool, args.idle)
    pid_path().write_text(json.dumps({"pid": os.getpid(), "socket": str(path), "proto": PROTO}))
    log.info("serving on %s: %d GPU(s) %s, %d cores, %d spare workers per key", path, len(gpus),
             [g.total_bytes for g in gpus], cores, spares)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: service.stopping.set())
    # ahead of need: sim/cpu runs, and cuda runs on each GPU
    for gpu in [None, *(g.visible for g in gpus)]:
        service.pool.top_up(PoolKey(sys.executable, str(PROJECT_ROOT), gpu, code_stamp()))
    try:
        service.serve(server)
    finally:
        server.close()
        for p in (path, pid_path()):
            try:
                p.unlink()
            except OSError:
                pass
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
