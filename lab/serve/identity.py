"""Who a browser is, in a workshop: signed cookies, names claimed with a code, a cap.

A learner types into a process on the server under a name, and the name opens that learner's
progress. So a name is not taken on the browser's word:

- Cookies are signed (HMAC-SHA256) with a secret kept in the workshop folder
  (`<workshop>/secret`, mode 0600, made once): a restart keeps everyone signed in, and a cookie
  written by hand is not one the server signed.
- The first browser that gives a name claims it: the server makes the learner's code
  (`<workshop>/claims/<name>`, 0600; the app shows it to that learner). Another browser that
  gives the same name must also give that code. `memlab class release NAME` forgets the claim
  (a learner on a new machine who lost the code); every cookie signed for the old claim stops
  working, the progress stays.
- At most `max_learners` names per class: a new name past the cap is refused, so cookies or
  forms cannot fill the disk with folders.
- With an access token, the token is exchanged for a session cookie signed for that token
  (`session_cookie`): the cookie is not the token, and changing the token ends the sessions.

Headless: no aiohttp, no Textual (the guard and the server call this).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path
from urllib.parse import quote, unquote

from lab.serve.workshop import LEARNERS, NAME_HELP, learner_home, learners, sanitize_name

SECRET_FILE = "secret"
CLAIMS_DIR = "claims"
MAX_LEARNERS = 200  # default cap of `memlab serve --max-learners`
SESSION_MAX_AGE_S = 7 * 24 * 3600
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a screen, typed
CODE_LENGTH = 8  # 40 bits: guessing one over HTTP takes longer than any workshop


class ClaimRefused(Exception):
    """One line for the name form: why this browser may not have that name."""


def write_private(path: Path, text: str) -> bool:
    """Create `path` (0600) with `text`, unless it exists (False then). Atomic against a second
    process doing the same (O_EXCL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return True


def load_or_create_secret(root: Path, name: str = SECRET_FILE) -> bytes:
    """A signing secret: read from `<root>/<name>` (the workshop's `secret`), or made (0600)
    once."""
    from lab.user_files import SMALL_LIMIT, UserFileError, read_user_file

    path = Path(root) / name
    for _ in range(2):
        try:
            text = read_user_file(path, SMALL_LIMIT).decode("utf-8", "replace").strip()
            if len(text) >= 32:
                return bytes.fromhex(text)
        except UserFileError as e:
            if not e.missing:
                break  # a folder, a FIFO: said below
        except ValueError:
            pass
        if not write_private(path, secrets.token_hex(32)):
            time.sleep(0.05)  # another process is writing it: read theirs
    raise OSError(f"{path}: not a memlab secret (delete it: a new one is made, and everyone "
                  "gives their name again)")


def normalise_code(raw: str) -> str:
    """'k7q2-mxab ' -> 'K7Q2MXAB': what a person types, as the code is stored."""
    return "".join(ch for ch in str(raw).upper() if ch in CODE_ALPHABET)[:CODE_LENGTH * 2]


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))  # constant time


def format_code(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


class Identity:
    def __init__(self, root: Path, secret: bytes, max_learners: int = MAX_LEARNERS):
        self.root = Path(root)
        self.secret = secret
        self.max_learners = max_learners

    # ---- signatures ---------------------------------------------------------------------------
    def _sign(self, *parts: str) -> str:
        message = "\0".join(parts).encode("utf-8")
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    # ---- learners -----------------------------------------------------------------------------
    def code_of(self, name: str) -> str | None:
        from lab.user_files import SMALL_LIMIT, read_user_file

        try:
            code = read_user_file(self.root / CLAIMS_DIR / name, SMALL_LIMIT).decode().strip()
        except (OSError, ValueError):  # none (UserFileError), or not what the lab wrote
            return None
        return code or None

    def learner_cookie(self, name: str) -> str:
        code = self.code_of(name)
        if code is None:
            raise ClaimRefused(f"{name!r} is not claimed")
        # percent-encoded: a cookie is ASCII, a name may be '李雷' (ASCII names are unchanged)
        return f"{quote(name, safe='')}.{self._sign('learner', name, code)}"

    def learner_of(self, cookie: str | None) -> str | None:
        """The learner a cookie was signed for, while their claim stands; else None."""
        if not cookie or "." not in cookie or len(cookie) > 600:
            return None
        quoted, _, sig = cookie.rpartition(".")
        try:
            name = unquote(quoted, errors="strict")
            if sanitize_name(name) != name:
                return None
        except (ValueError, UnicodeDecodeError):
            return None
        code = self.code_of(name)
        if code is None:
            return None
        return name if _same(sig, self._sign("learner", name, code)) else None

    def claim(self, raw_name: str, code: str = "") -> str:
        """The sanitised name this browser may use, claiming it when it is free. Raises
        ClaimRefused: no usable name, the class is full, or taken and the code does not match."""
        try:
            name = sanitize_name(raw_name)
        except ValueError:
            raise ClaimRefused(f"Please use {NAME_HELP}.") from None
        held = self.code_of(name)
        if held is not None:
            if code and _same(normalise_code(code), held):
                return name
            raise ClaimRefused(
                f"The name {name!r} is in use in another browser. Type the code that browser "
                "shows when the lab opens, or ask your instructor to release the name "
                f"(memlab class release {name}).")
        from filelock import FileLock

        with FileLock(str(self.root / CLAIMS_DIR / ".lock"), timeout=10):
            known = set(learners(self.root))
            if name not in known and len(known) >= self.max_learners:
                raise ClaimRefused(f"This class is full ({self.max_learners} learners): ask "
                                   "your instructor.")
            new = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            if not write_private(self.root / CLAIMS_DIR / name, new):
                # claimed a moment ago by another browser
                raise ClaimRefused(f"The name {name!r} was just taken: give its code, or "
                                   "another name.")
            learner_home(self.root, name)
        return name

    def release(self, name: str) -> bool:
        """Forget a name's claim (its progress stays); True when it was claimed."""
        try:
            (self.root / CLAIMS_DIR / sanitize_name(name)).unlink()
            return True
        except (FileNotFoundError, ValueError):
            return False

    # ---- the access token's session ----------------------------------------------------------
    def _token_id(self, token: str) -> str:
        return hashlib.sha256(token.encode("utf-8")).hexdigest()

    def session_cookie(self, token: str, now: float | None = None) -> str:
        issued = str(int(time.time() if now is None else now))
        nonce = secrets.token_hex(8)
        return f"{issued}.{nonce}.{self._sign('session', self._token_id(token), issued, nonce)}"

    def session_ok(self, cookie: str | None, token: str, now: float | None = None) -> bool:
        if not cookie or cookie.count(".") != 2 or len(cookie) > 200:
            return False
        issued, nonce, sig = cookie.split(".")
        if not (issued.isascii() and issued.isdigit() and len(issued) <= 12):
            return False  # '¹'.isdigit() is true and int('¹') raises: a 500 once, token logged
        age = (time.time() if now is None else now) - int(issued)
        if not 0 <= age <= SESSION_MAX_AGE_S:
            return False
        return _same(sig, self._sign("session", self._token_id(token), issued, nonce))


__all__ = ["CLAIMS_DIR", "ClaimRefused", "Identity", "LEARNERS", "MAX_LEARNERS", "SECRET_FILE",
           "SESSION_MAX_AGE_S", "format_code", "load_or_create_secret", "normalise_code",
           "write_private"]
