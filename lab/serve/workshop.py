"""The workshop folder on the server: learners, the access token, the class state.

    <workshop>/token                  the access token (0600), kept across restarts
    <workshop>/learners/<name>/       each learner's data folder (their MEMLAB_HOME):
                                      progress.jsonl, results, test-state.json
    <workshop>/class/state.json       the class state (lab/serve/classroom.py)
    <workshop>/class/runs/<lesson-id>/<variant>.json   runs the instructor pushed

`<workshop>` is `--data DIR`, else `$MEMLAB_HOME/workshop` (the user data folder's
`workshop`). A learner's name becomes a folder name, so it is sanitised first.

Headless: no Textual, no aiohttp.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import unicodedata
from pathlib import Path

NAME_MAX = 32
NAME_HELP = f"letters (any alphabet), digits, '-' or '_', at most {NAME_MAX} characters"
TOKEN_FILE = "token"
LEARNERS = "learners"
LOOPBACK_NAME = "localhost"  # the one name taken as loopback; any other name could resolve anywhere


def is_loopback(host: str) -> bool:
    """A host that only this machine reaches: an IP address in 127.0.0.0/8 or ::1 (as
    `ipaddress` reads it, not by its text: "127.0.0.1.evil.example" is a name, and names
    resolve wherever their owner says), or the name `localhost`."""
    host = host.strip().strip("[]").lower()
    if host == LOOPBACK_NAME:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def workshop_dir(explicit: str | os.PathLike | None = None) -> Path:
    """`--data DIR`, else the data folder's `workshop`; UserFileError (one line) when that is a
    file, or lies under one."""
    from lab.user_files import usable_folder

    if explicit:
        return usable_folder(explicit, "--data")
    from lab.course.progress import data_dir

    return usable_folder(data_dir() / "workshop", "the workshop folder")


def _fold(ch: str) -> str:
    """A Latin letter with accents -> the plain letter ('ë' -> 'e', as the names of earlier
    workshops were made); any other character as it is ('李', 'и', 'ß')."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    return plain if plain and plain.isascii() else ch


def _kept(ch: str, prev: str) -> bool:
    """Letters and digits of any script, '-', '_', and the marks that complete a letter (the
    vowel signs of Devanagari, Thai, ...); never a control, format (bidi overrides, zero
    widths), space, punctuation or symbol character."""
    kind = unicodedata.category(ch)[0]
    return ch in "-_" or kind in "LN" or (kind == "M" and prev not in "-_")


def sanitize_name(raw: str) -> str:
    """'Zoë Martin' -> 'zoe-martin', 'Иван' -> 'иван', '李雷' -> '李雷'. ValueError when
    nothing usable is left.

    NFKC first (full-width and compatibility forms become plain letters and digits), accents on
    Latin letters folded away, lower case; anything but letters, digits (any script), '-' and
    '_' becomes '-', so the name is one folder (no '/', no '..', no hidden file, no control
    character) on any file system, at most NAME_MAX characters (128 bytes in UTF-8). A name
    already sanitised comes back unchanged (`checked_name` relies on it)."""
    text = unicodedata.normalize("NFKC", str(raw))
    text = unicodedata.normalize("NFC", "".join(map(_fold, text)).lower())
    out: list[str] = []
    for ch in text:
        out.append(ch if _kept(ch, out[-1] if out else "-") else "-")
    text = re.sub(r"-{2,}", "-", "".join(out)).strip("-_")
    text = text[:NAME_MAX].strip("-_")
    if not text:
        shown = raw if len(str(raw)) <= 40 else str(raw)[:37] + "…"
        raise ValueError(f"a name needs {NAME_HELP} (got {shown!r})")
    return text


def checked_name(raw: object, what: str = "name") -> str:
    """`raw` itself when it is already a safe folder or file name (what `sanitize_name` leaves
    unchanged), else ValueError: a name read from a file never becomes a path unchecked."""
    if not isinstance(raw, str):
        raise ValueError(f"{what} {raw!r} is not text")
    try:
        ok = sanitize_name(raw) == raw
    except ValueError:
        ok = False
    if not ok:
        shown = raw if len(raw) <= 40 else raw[:37] + "…"
        raise ValueError(f"{what} {shown!r} is not a safe file name ({NAME_HELP})")
    return raw


def learner_home(root: Path, name: str) -> Path:
    """The learner's data folder (created); `name` must already be sanitised."""
    if sanitize_name(name) != name:
        raise ValueError(f"not a sanitised learner name: {name!r}")
    home = root / LEARNERS / name
    home.mkdir(parents=True, exist_ok=True)
    return home


def learners(root: Path) -> list[str]:
    folder = root / LEARNERS
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_or_create_token(root: Path) -> str:
    """The workshop's access token: read from `<workshop>/token`, or made (0600) once."""
    from lab.user_files import SMALL_LIMIT, UserFileError, read_user_file

    path = root / TOKEN_FILE
    try:
        token = read_user_file(path, SMALL_LIMIT).decode("utf-8", "replace").strip()
        if token:
            return token
    except UserFileError as e:  # a folder, a FIFO, 1 GB: not a token the lab wrote
        if not e.missing:
            raise UserFileError(f"{e} (the access token: delete it, and a new one is made)"
                                ) from None
    root.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token


__all__ = ["NAME_HELP", "checked_name", "is_loopback", "learner_home", "learners",
           "load_or_create_token", "sanitize_name", "workshop_dir"]
