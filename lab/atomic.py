"""One atomic writer: a reader sees the old file or the new one, never half of either.

The data goes to a temporary file in the same folder (same filesystem), is flushed and
fsync'ed, then `os.replace`d over the target (atomic on POSIX and Windows). On any failure the
temporary file is removed and the old file is left as it was. The new file gets the
permissions a plain `open(path, "w")` would give (0666 less the umask), not mkstemp's 0600.
Torch-free, stdlib only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: read once, at import
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()


def atomic_write(path: str | Path, data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Write `data` (text or bytes) to `path` atomically, creating the folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, _MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode(encoding) if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def leftovers(path: str | Path) -> list[Path]:
    """The temporary files `atomic_write(path, …)` leaves when its process is killed mid-write
    (SIGKILL, a power cut: no `except` runs)."""
    path = Path(path)
    try:
        return sorted(path.parent.glob(f".{glob_escape(path.name)}.*.tmp"))
    except OSError:
        return []


def remove_leftovers(path: str | Path, older_than_s: float = 0.0) -> int:
    """Remove `leftovers(path)`, those older than `older_than_s` only; how many went.

    Safe only where no other writer of `path` can be mid-write: under the file's lock (the
    progress file), or with an age no write takes (a write lasts milliseconds)."""
    import time

    gone = 0
    for tmp in leftovers(path):
        try:
            if older_than_s and time.time() - tmp.stat().st_mtime < older_than_s:
                continue
            tmp.unlink()
            gone += 1
        except OSError:
            pass
    return gone


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


__all__ = ["atomic_write", "leftovers", "remove_leftovers"]
