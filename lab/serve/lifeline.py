"""A served tab's app lives only as long as its server: it follows it, and leftovers are reaped.

textual-serve starts one app process per browser tab and stops it when the tab's websocket
closes. When the server itself dies (`kill -9`, a crash, the machine's OOM killer), nothing
stops them: the app's input thread sees its stdin end and returns, and the app idles on,
holding memory and a learner's folder, until someone kills it by hand. So:

- `follow_server()` (in the app process, served mode only): on Linux the kernel sends the app
  SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`, through ctypes; the tab command
  `exec`s the app so that its parent is the server, not a shell). Everywhere, a daemon
  thread also checks once a second that the server is still its parent (a process whose
  parent died is re-parented), and sends the same SIGTERM; Textual's web driver turns it into
  a clean exit (progress is saved as it changes). If the app has not exited 3 s later, an
  alarm (SIGALRM, whose default action the kernel carries out) ends the process.
- Each app registers itself in `<workshop>/tabs/<pid>.json` (its pid, its start time, its
  server's) and removes the file at exit. `reap()` (the server, at start) ends every
  registered app whose server is gone: SIGTERM, then SIGKILL after a grace period. A pid is
  only signalled while its start time (Linux: /proc/<pid>/stat) is still the one registered,
  so a pid the system gave to another process since is never touched; where there is no
  /proc, reap signals nothing and the thread above is what ends leftovers.

Headless: no Textual, no aiohttp.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

TABS_DIR = "tabs"
POLL_S = 1.0
# after SIGTERM, how long the app may take to exit on its own. Short: with its server gone the
# app serves no one, and it has nothing to save (progress is saved, atomically, as it changes);
# a clean exit costs each app ~1 s of CPU, and thirty of them at once on two cores took 30 s.
EXIT_GRACE_S = 3.0
REAP_GRACE_S = 5.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def start_time(pid: int) -> str | None:
    """The process's start time since boot, in clock ticks (Linux), as text; None elsewhere
    or when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and ')': the fields after its last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of the whole line


def alive(pid: int) -> bool:
    """The process runs (a zombie, dead but not yet collected by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] not in "ZX"
    except (OSError, ValueError, IndexError):
        return True


def _set_parent_death_signal(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _end_self() -> None:
    # The kernel ends the process EXIT_GRACE_S from now whatever Python is doing: under load a
    # clean exit takes longer, and once the interpreter finalises, this (daemon) thread is
    # stopped, so a sleep-then-exit here alone would never fire. Nothing is lost: saves are atomic.
    if hasattr(signal, "alarm"):
        signal.alarm(int(EXIT_GRACE_S))  # SIGALRM's default action ends the process
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(EXIT_GRACE_S + 1)
    os._exit(1)


def _server_gone(parent: int, server_pid: int, server_start: str | None) -> bool:
    if os.getppid() != parent:
        return True  # re-parented: the process that started this one died
    if server_start is not None:
        return start_time(server_pid) != server_start
    return not alive(server_pid)


def _watch(parent: int, server_pid: int, server_start: str | None) -> None:
    while not _server_gone(parent, server_pid, server_start):
        time.sleep(POLL_S)
    _end_self()


def follow_server(server_pid: int | None = None, workshop: str | os.PathLike | None = None) -> None:
    """Call once, early, in an app started by `memlab serve` (see the module docstring)."""
    parent = os.getppid()
    server_pid = server_pid or parent
    server_start = start_time(server_pid)
    _set_parent_death_signal(signal.SIGTERM)
    if _server_gone(parent, server_pid, server_start):
        _end_self()  # it died before the signal was asked for
    threading.Thread(target=_watch, args=(parent, server_pid, server_start),
                     name="memlab-lifeline", daemon=True).start()
    if workshop:
        register(Path(workshop), server_pid)


def follow_if_served() -> None:
    """`follow_server` for an app whose environment says `memlab serve` started it."""
    from lab.serve import policy

    if not policy.served():
        return
    try:
        server_pid = int(os.environ.get(policy.SERVER_PID_ENV, ""))
    except ValueError:
        server_pid = None
    follow_server(server_pid, os.environ.get(policy.CLASS_ENV) or None)


# ---- the registry of running tabs -----------------------------------------------------------
def register(workshop: Path, server_pid: int) -> Path | None:
    folder = workshop / TABS_DIR
    pid = os.getpid()
    entry = {"pid": pid, "start": start_time(pid), "server_pid": server_pid,
             "server_start": start_time(server_pid)}
    path = folder / f"{pid}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(entry), encoding="utf-8")
    except OSError:
        return None

    def unregister() -> None:
        try:
            path.unlink()
        except OSError:
            pass
    atexit.register(unregister)
    return path


def _entries(workshop: Path) -> list[tuple[Path, dict]]:
    out = []
    folder = workshop / TABS_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(entry, dict) and isinstance(entry.get("pid"), int):
                out.append((path, entry))
                continue
        except (OSError, ValueError):
            pass
        path.unlink(missing_ok=True)  # not an entry this module wrote
    return out


def _same_process(pid: int, start: object) -> bool:
    """`pid` is still the process that registered (its start time unchanged)."""
    return start is not None and start_time(pid) == start


def leftovers(workshop: Path) -> list[tuple[Path, int]]:
    """Registered apps that still run although their server is gone."""
    found = []
    for path, entry in _entries(workshop):
        pid = entry["pid"]
        if not _same_process(pid, entry.get("start")):
            path.unlink(missing_ok=True)  # ended (or its pid is someone else's now)
            continue
        server = entry.get("server_pid")
        if isinstance(server, int) and _same_process(server, entry.get("server_start")):
            continue  # its server still runs (another `memlab serve` on this folder)
        found.append((path, pid))
    return found


def reap(workshop: Path, grace_s: float = REAP_GRACE_S) -> int:
    """End the apps a dead server left behind; how many there were."""
    found = leftovers(Path(workshop))
    for _, pid in found:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(pid) for _, pid in found):
        time.sleep(0.05)
    for path, pid in found:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        path.unlink(missing_ok=True)
    return len(found)


__all__ = ["TABS_DIR", "alive", "follow_if_served", "follow_server", "leftovers", "reap",
           "register", "start_time"]
