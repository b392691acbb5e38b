"""A JupyterHub user's folder in the class service's workshop: one user, one folder, for good.

The class service keeps each learner's progress in `<workshop>/learners/<folder>/`, the layout
`memlab serve` and `memlab class` use. A hub user name is not always a folder name (`a.b@x.org`,
or 60 characters), and sanitising is not one-to-one: `a.b` and `a-b` both become `a-b`. So a
folder is claimed by the first hub user that reports into it (`<workshop>/claims/<folder>`
holds `hub:<exact hub name>`, written once, O_EXCL), and another hub user whose name sanitises
the same gets the folder `<name>-<8 hex of a hash of their hub name>` instead. No hub user can
write into a folder another one claimed, whatever name they pick.

Headless: no aiohttp, no Textual.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lab.serve.identity import CLAIMS_DIR, write_private
from lab.serve.workshop import NAME_MAX, learner_home, learners, sanitize_name
from lab.user_files import SMALL_LIMIT, read_user_file

HUB_PREFIX = "hub:"


class FolderRefused(Exception):
    """One line: why this hub user gets no folder here."""


def _owner(root: Path, folder: str) -> str | None:
    try:
        return read_user_file(root / CLAIMS_DIR / folder, SMALL_LIMIT).decode("utf-8").strip()
    except (OSError, ValueError):  # none yet (UserFileError is an OSError), or not text
        return None


def candidates(hub_name: str) -> list[str]:
    """The folders a hub user may have, in order: their sanitised name, then that name with a
    hash of the exact hub name (for when another user has the first)."""
    try:
        base = sanitize_name(hub_name)
    except ValueError:
        base = "learner"
    digest = hashlib.sha256(hub_name.encode("utf-8")).hexdigest()[:8]
    hashed = sanitize_name(f"{base[:NAME_MAX - 9]}-{digest}")
    return [base, hashed] if base != hashed else [base]


def folder_of(root: Path, hub_name: str, max_learners: int) -> str:
    """The folder of `hub_name` under `root`, claimed on first use (and created). Raises
    FolderRefused: the class is full, or every folder it may have is another user's."""
    if not isinstance(hub_name, str) or not hub_name or len(hub_name) > 255:
        raise FolderRefused("a hub user name is 1 to 255 characters")
    mine = HUB_PREFIX + hub_name
    for folder in candidates(hub_name):
        owner = _owner(root, folder)
        if owner == mine:
            return folder
        if owner is not None:
            continue  # another hub user's (or a name claimed in `memlab serve`)
        from filelock import FileLock

        with FileLock(str(root / CLAIMS_DIR / ".lock"), timeout=10):
            if folder not in learners(root) and len(learners(root)) >= max_learners:
                raise FolderRefused(f"this class is full ({max_learners} learners)")
            if write_private(root / CLAIMS_DIR / folder, mine) or _owner(root, folder) == mine:
                learner_home(root, folder)
                return folder
    raise FolderRefused(f"every folder {hub_name!r} may have is another learner's")


__all__ = ["FolderRefused", "HUB_PREFIX", "candidates", "folder_of"]
