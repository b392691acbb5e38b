"""The torch and transformers versions the lab is validated on (ONE table: versions.json beside
this file), what a result records of them, and the rule for others.

    older than the floor        refused in one line (the CLI, before anything imports torch)
    floor .. newest validated   validated (2.12 lies between 2.11 and 2.13: in the range)
    newer                       runs; the commands whose numbers used that library say so once,
                                on stderr, unless `memlab doctor --validate` passed it here

The range grows by running the lab on a release, not by editing a table: `memlab doctor
--validate` records its outcome for this user (`validated-versions.json` in the user data
folder), and `memlab dev versions --add` writes a passing run into versions.json
(CONTRIBUTING.md#versions-and-the-suites-time). Torch-free at import (package metadata and
JSON), so the CLI checks before torch is imported.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import json
import os
import platform
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

TABLE_PATH = Path(__file__).with_name("versions.json")
LIBRARIES = ("torch", "transformers")  # the ones whose versions move sim's numbers
# optional libraries whose versions change what a lesson measures: distribution -> import name
EXTRAS = {"peft": "peft", "torchao": "torchao", "pytorch-lightning": "pytorch_lightning",
          "liger-kernel": "liger_kernel", "accelerate": "accelerate"}
USER_RECORD = "validated-versions.json"  # in the user data folder (lab.course.progress's folder)
PASSED = ("same", "within")  # a validation's outcomes that validate a version
VALIDATE_HINT = "`memlab doctor --validate` checks it here (about 3 minutes)"


# ---- the table -------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def table() -> dict:
    """versions.json's libraries: {name: {floor, recorded, validated: [{version, how}]}}."""
    return json.loads(TABLE_PATH.read_text(encoding="utf-8"))["libraries"]


def minor_of(version: str) -> str:
    """'2.13.0+cpu' -> '2.13'; '5.25.0' -> '5.25'; '' -> ''."""
    m = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def _key(version: str) -> tuple[int, int]:
    m = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def validated_versions(name: str) -> tuple[str, ...]:
    """The minor versions a run checked (versions.json), oldest first: ('2.11', '2.13')."""
    return tuple(sorted({v["version"] for v in table()[name]["validated"]}, key=_key))


def validated_range(name: str) -> tuple[str, str]:
    """(floor, newest validated) as major.minor: ('5.17', '5.24')."""
    return table()[name]["floor"], validated_versions(name)[-1]


def recorded(name: str) -> str:
    """The minor version the H200 recordings ran (what judges sim: bench/sim_vs_h200.py)."""
    return table()[name]["recorded"]


def in_range(name: str, version: str) -> bool:
    floor, top = validated_range(name)
    return _key(floor) <= _key(version) <= _key(top)


# ---- this machine ----------------------------------------------------------------------------
def installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def transformers_version() -> str:
    """The installed transformers ("" when it is not installed)."""
    return installed("transformers") or ""


def library_versions(used: set[str] | None = None) -> dict[str, str]:
    """python, torch and the libraries a run used (`libraries_used`; None: every one installed):
    what a result records, so a number reads "on torch X, transformers Y" only where Y mattered."""
    out = {"python": platform.python_version()}
    for name in (*LIBRARIES, *EXTRAS):
        v = installed(name)
        if v and (used is None or name == "torch" or name in used
                  or EXTRAS.get(name) in sys.modules):  # no warm-up imports an extra
            out[name] = v
    return out


@contextmanager
def libraries_used() -> Iterator[set[str]]:
    """The libraries the code in this block used: "transformers" once it builds a transformers
    model (extras: `library_versions` sees them imported). Workers import transformers ahead of need (lab.runner.
    worker.warm_up), so `sys.modules` cannot tell: a global module-registration hook (public
    torch API, called as modules are built, never in forward) sees a transformers module adopt
    a child."""
    import torch

    used: set[str] = set()

    def on_child(module, name, child):
        if type(module).__module__.startswith("transformers."):
            used.add("transformers")

    handle = torch.nn.modules.module.register_module_module_registration_hook(on_child)
    try:
        yield used
    finally:
        handle.remove()


# ---- this user's validations (memlab doctor --validate) --------------------------------------
def user_record_path() -> Path:
    """The user data folder's record (MEMLAB_HOME overrides it, as for progress)."""
    home = os.environ.get("MEMLAB_HOME")
    if home:
        return Path(home).expanduser() / USER_RECORD
    from platformdirs import user_data_dir

    return Path(user_data_dir("memlab", appauthor=False)) / USER_RECORD


def user_record() -> dict:
    """{library: {version: {outcome, summary, with, date}}}; {} when none (or unreadable: a
    record is a convenience, never a reason to fail)."""
    try:
        data = json.loads(user_record_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def validated_here(name: str, version: str) -> dict | None:
    """This user's validation of exactly `version` (a patch release may change model code)."""
    entry = user_record().get(name, {}).get(version)
    return entry if isinstance(entry, dict) else None


# ---- the rule --------------------------------------------------------------------------------
def refusal(versions: dict[str, str | None] | None = None) -> str | None:
    """Why this cannot run (a library older than the floor), or None."""
    versions = versions if versions is not None else {n: installed(n) for n in LIBRARIES}
    for name in LIBRARIES:
        v = versions.get(name)
        floor = table()[name]["floor"]
        if v and _key(v) < _key(floor):
            return (f"{name} {v} is older than {floor}, the oldest this lab is validated on; "
                    f"pip install '{name}>={floor}'")
    return None


def unvalidated(name: str, version: str | None = None) -> str | None:
    """One line when `name` (installed, or `version`) is newer than validated and no validation
    here passed it; None otherwise."""
    v = version if version is not None else installed(name)
    if not v or _key(v) <= _key(validated_range(name)[1]):
        return None
    floor, top = validated_range(name)
    mine = validated_here(name, v)
    if mine and mine.get("outcome") in PASSED:
        return None
    if mine:
        return (f"{name} {v} moved this lab's numbers here ({mine.get('summary', 'moved')}; "
                f"memlab doctor --validate, {mine.get('date', '')[:10]})")
    return (f"{name} {v} is newer than the versions this lab is validated on ({floor}-{top}); "
            f"{VALIDATE_HINT}")


_NOTED: set[str] = set()


def note_unvalidated(libraries, stream=None) -> None:
    """Say `unvalidated` on stderr for each of `libraries` (those the numbers just shown used),
    once per process."""
    for name in libraries:
        if name in LIBRARIES and name not in _NOTED:
            _NOTED.add(name)
            line = unvalidated(name)
            if line:
                print(f"memlab: note: {line}", file=stream or sys.stderr)


def used_by(results) -> set[str]:
    """The libraries a list of RunResults used (their `versions`; torch always)."""
    used = {"torch"}
    for r in results:
        used.update(n for n in (getattr(r, "versions", None) or {}) if n in LIBRARIES)
    return used


__all__ = ["EXTRAS", "LIBRARIES", "PASSED", "TABLE_PATH", "in_range", "installed",
           "libraries_used", "library_versions", "minor_of", "note_unvalidated", "recorded",
           "refusal", "table", "transformers_version", "unvalidated", "used_by",
           "user_record", "user_record_path", "validated_here", "validated_range",
           "validated_versions"]
