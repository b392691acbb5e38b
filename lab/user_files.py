"""The one way the lab reads a file a person named: bounded, regular files only, one line.

`memlab view`, `diff`, `export`, `compare --config`, `class push --results`, `memlab class` (the
learners' progress files), the progress store and a served tab's "Diff two runs" all read files
whose path someone typed, or that live in a folder someone else can write. Read naively, such a
path can hang the process or fill its memory:

- a FIFO blocks `open()` until a writer comes (forever, for `memlab view fifo`);
- `/dev/zero`, `/dev/urandom` and `/proc/kcore` never end (a served tab grew 1.2 -> 3.7 GB in
  1.5 s on "Diff two runs /dev/zero /dev/zero");
- a 40 GB file, or a gzip that inflates to one, is read whole before any parser can refuse it.

So every such read goes through here: the path is `stat`ed first (which never blocks) and only a
regular file is opened, with O_NONBLOCK (so a file swapped for a FIFO between the two calls
cannot block either) and checked again on the open descriptor; at most `limit` bytes are read
(a file that grows, or a /proc file that says it is empty, cannot read past it); a gzip is
bounded by what it inflates to. Each refusal is a `UserFileError`: one line that names the file,
what it is, and what the lab reads. `usable_folder` does the same for a folder a person names
(`--data`, `MEMLAB_HOME`): a file there is refused in one line instead of a traceback later.

Stdlib only: no torch, no Textual.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO

KiB, MiB, GiB = 2**10, 2**20, 2**30
# What each kind of file may weigh. Generous for what the lab writes, far below what hurts:
RESULT_LIMIT = 256 * MiB  # `memlab run --json`: a few MB with a timeline and 26 lessons' runs
CONFIG_LIMIT = 16 * MiB  # a model's config.json: a few KB
PROGRESS_LIMIT = 64 * MiB  # progress.jsonl: 500 run records at most, ~200 KB
SNAPSHOT_LIMIT = 8 * GiB  # a PyTorch memory snapshot of a long run with stacks: GBs
SMALL_LIMIT = 1 * MiB  # a token, a claim code, a class state
SERVED_LIMIT = 256 * MiB  # any file, in a tab of `memlab serve`: the server's memory is everyone's

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class UserFileError(ValueError):
    """One line: which file, what is wrong with it, what the lab reads. `missing`: there is no
    such file (a caller may treat that as "nothing yet" rather than as an error)."""

    def __init__(self, text: str, missing: bool = False):
        super().__init__(text)
        self.missing = missing


def size_text(n: int) -> str:
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} B"


def _shown(path: str | os.PathLike) -> str:
    text = os.fspath(path)
    text = text if isinstance(text, str) else os.fsdecode(text)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)  # one line, whatever the name
    return text if len(text) <= 120 else text[:117] + "…"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse(path, e: OSError) -> UserFileError:
    why = {2: "no such file", 13: "permission denied", 20: "a part of the path is not a folder",
           36: "the name is too long", 40: "too many symbolic links"}.get(e.errno or 0)
    return UserFileError(f"{_shown(path)}: {why or (e.strerror or type(e).__name__).lower()}",
                         missing=isinstance(e, FileNotFoundError))


def served_limit(limit: int) -> int:
    """`limit`, or less in a lab served to browsers: there the server's memory is the class's."""
    from lab.served import served

    return min(limit, SERVED_LIMIT) if served() else limit


def open_user_file(path: str | os.PathLike, limit: int, what: str = "") -> BinaryIO:
    """A binary file object on `path`, a regular file of at most `limit` bytes (UserFileError
    otherwise). Reading past `limit` raises UserFileError too (a file that grows)."""
    shown = f"{what} {_shown(path)}" if what else _shown(path)
    limit = served_limit(limit)
    p = os.path.expanduser(os.fspath(path))
    try:
        st = os.stat(p)  # never blocks, whatever the file is
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise (_refuse(shown, e) if isinstance(e, OSError)
               else UserFileError(f"{shown}: not a file name")) from None
    if not stat.S_ISREG(st.st_mode):
        raise UserFileError(f"{shown} is {_kind(st.st_mode)}; the lab reads only regular files")
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise _refuse(shown, e) from None
    try:
        st = os.fstat(fd)  # the file actually opened (it may have been swapped since the stat)
        if not stat.S_ISREG(st.st_mode):
            raise UserFileError(f"{shown} is {_kind(st.st_mode)}; the lab reads only regular files")
        _check_size(shown, st.st_size, limit)
        raw = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_Bounded(raw, limit, shown))


def read_user_file(path: str | os.PathLike, limit: int, what: str = "",
                   inflate: bool = False) -> bytes:
    """The whole of a regular file of at most `limit` bytes, or UserFileError (one line).
    `inflate`: a gzip file is decompressed, and what it inflates to is bounded by `limit` too."""
    limit = served_limit(limit)
    with open_user_file(path, limit, what) as f:
        data = f.read()
    if inflate and data[:2] == b"\x1f\x8b":
        shown = f"{what} {_shown(path)}" if what else _shown(path)
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as z:
                data = _Bounded(z, limit, shown, inflated=True).readall()
        except (OSError, EOFError) as e:
            raise UserFileError(f"{shown}: not a readable gzip ({e})") from None
    return data


def _check_size(shown: str, size: int, limit: int) -> None:
    if size > limit:
        raise UserFileError(f"{shown} is {size_text(size)}, more than the {size_text(limit)} "
                            "the lab reads for such a file")


class _Bounded(io.RawIOBase):
    """A raw reader that refuses to go past `limit` bytes (UserFileError)."""

    def __init__(self, inner, limit: int, shown: str, inflated: bool = False):
        self.inner, self.left, self.limit, self.shown = inner, limit, limit, shown
        self.inflated = inflated

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = min(len(buffer), self.left + 1)  # one more: to tell "exactly limit" from "more"
        chunk = self.inner.read(want)
        if not chunk:
            return 0
        if len(chunk) > self.left:  # a file that grew, a /proc file, a gzip that inflates
            verb = "inflates to" if self.inflated else "holds"
            raise UserFileError(f"{self.shown} {verb} more than the {size_text(self.limit)} the "
                                "lab reads for such a file")
        self.left -= len(chunk)
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


def open_gzip_or_plain(path: str | os.PathLike, limit: int, what: str = "") -> BinaryIO:
    """Like `open_user_file`, but a gzip file is read through, inflated, within `limit` too
    (a snapshot saved as .pkl.gz must not inflate without bound)."""
    limit = served_limit(limit)
    f = open_user_file(path, limit, what)
    try:
        gz = f.peek(2)[:2] == b"\x1f\x8b"
    except BaseException:
        f.close()
        raise
    if not gz:
        return f
    shown = f"{what} {_shown(path)}" if what else _shown(path)
    return io.BufferedReader(_Bounded(gzip.GzipFile(fileobj=f), limit, shown, inflated=True))


def usable_folder(path: str | os.PathLike, what: str) -> Path:
    """`path` as a folder the lab may create and write in; UserFileError (one line) when it, or
    the nearest part of it that exists, is a file (or anything but a folder)."""
    p = Path(os.path.expanduser(os.fspath(path)))
    probe = p
    while True:
        try:
            st = os.stat(probe)
        except (FileNotFoundError, NotADirectoryError):  # look at the part above
            if probe.parent == probe:
                return p
            probe = probe.parent
            continue
        except OSError as e:
            raise UserFileError(f"{what} {_shown(p)}: {(e.strerror or str(e)).lower()}") from None
        except ValueError:
            raise UserFileError(f"{what} {_shown(p)}: not a folder name") from None
        if stat.S_ISDIR(st.st_mode):
            return p
        why = (f"is {_kind(st.st_mode)}" if probe == p else
               f"cannot be a folder ({_shown(probe)} is {_kind(st.st_mode)})")
        raise UserFileError(f"{what} {_shown(p)} {why}; give a folder (it is created when "
                            "missing)")


__all__ = ["CONFIG_LIMIT", "PROGRESS_LIMIT", "RESULT_LIMIT", "SMALL_LIMIT", "SNAPSHOT_LIMIT",
           "UserFileError", "SERVED_LIMIT", "open_gzip_or_plain", "open_user_file",
           "read_user_file", "served_limit", "size_text", "usable_folder"]
