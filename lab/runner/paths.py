"""Where the runner service lives: socket, lock and pid file (per-user runtime dir), log (state dir).

`MEMLAB_HOME` (tests, workshops) puts everything under it: `$MEMLAB_HOME/run`, `$MEMLAB_HOME/state`;
`MEMLAB_RUNNER_HOME` overrides it for the runner alone (`memlab serve` gives every tab the
server's, so forty learners' tabs share one service and its queue per GPU).
Otherwise platformdirs' user runtime dir (`$XDG_RUNTIME_DIR/memlab`) and user state dir.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from pathlib import Path

HOME_ENV = "MEMLAB_HOME"
# the runner's own home, before MEMLAB_HOME: a workshop's tabs each have their learner's
# MEMLAB_HOME but must share the machine's one service (one queue per GPU); "" = the defaults
RUNNER_HOME_ENV = "MEMLAB_RUNNER_HOME"
SOCKET_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


def runner_home() -> str | None:
    if RUNNER_HOME_ENV in os.environ:
        return os.environ[RUNNER_HOME_ENV] or None
    return os.environ.get(HOME_ENV) or None


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def runtime_dir() -> Path:
    home = runner_home()
    if home:
        return _private_dir(Path(home).expanduser() / "run")
    from platformdirs import user_runtime_dir

    with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set, falling back to /tmp/..."
        warnings.simplefilter("ignore")
        return _private_dir(Path(user_runtime_dir("memlab", appauthor=False)))


def state_dir() -> Path:
    home = runner_home()
    if home:
        return _private_dir(Path(home).expanduser() / "state")
    from platformdirs import user_state_dir

    return _private_dir(Path(user_state_dir("memlab", appauthor=False)))


def socket_path() -> Path:
    """runtime_dir/runner.sock, or a short name in a private /tmp folder when that is too long
    for a Unix socket address (deep temp folders in tests)."""
    run = runtime_dir()
    path = run / "runner.sock"
    if len(os.fsencode(path)) <= SOCKET_MAX:
        return path
    digest = hashlib.sha1(os.fsencode(run)).hexdigest()[:16]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    short = _private_dir(Path(tempfile.gettempdir()) / f"memlab-{uid}")
    return short / f"{digest}.sock"


def lock_path() -> Path:
    """Held by the live service for its whole life (filelock): who holds it, serves."""
    return runtime_dir() / "runner.lock"


def start_lock_path() -> Path:
    """Held by a client while it starts the service, so two clients start one service."""
    return runtime_dir() / "runner-start.lock"


def clients_dir() -> Path:
    """One empty file per app that uses the service, named by its pid: who is still using the
    service when one of them quits (lab.runner.remote.ServiceRunner.release)."""
    return _private_dir(runtime_dir() / "clients")


def pid_path() -> Path:
    return runtime_dir() / "runner.pid"


def log_path() -> Path:
    return state_dir() / "runner.log"
