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


__all__ = ["atomic_write"]
