"""The library versions the lab is validated on, what a result records of them, and the rule for
others: an older torch or transformers is refused in one line; a newer one runs, with one line
saying it is unvalidated.

Validated means: the H200 recordings (torch 2.11, transformers 5.17), sim checked against them
on this lab's CPU machines (torch 2.13, transformers 5.24), and the whole suite passing on the
versions CI pins (.ci/constraints.txt). pyproject's floors are the same numbers. Torch-free (read
from package metadata), so the CLI checks before anything imports torch.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import re

# (floor, newest validated) as major.minor
VALIDATED = {"torch": ("2.11", "2.13"), "transformers": ("5.17", "5.24")}
# optional libraries whose versions change what a lesson measures
EXTRAS = ("peft", "torchao", "pytorch-lightning", "liger-kernel", "accelerate")


def installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str]:
    """python, torch, transformers and the installed extras: what a result records."""
    out = {"python": platform.python_version()}
    for name in (*VALIDATED, *EXTRAS):
        v = installed(name)
        if v:
            out[name] = v
    return out


def _minor(v: str) -> tuple[int, int]:
    m = re.match(r"\s*(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def check(versions: dict[str, str | None] | None = None) -> tuple[str | None, list[str]]:
    """(why this cannot run, or None; one warning line per library newer than validated)."""
    versions = versions if versions is not None else {n: installed(n) for n in VALIDATED}
    warnings = []
    for name, (floor, top) in VALIDATED.items():
        v = versions.get(name)
        if not v:
            continue
        if _minor(v) < _minor(floor):
            return (f"{name} {v} is older than {floor}, the oldest this lab is validated on; "
                    f"pip install '{name}>={floor}'"), []
        if _minor(v) > _minor(top):
            warnings.append(f"{name} {v} is newer than the versions this lab is validated on "
                            f"({floor}-{top}): numbers may differ from the recordings")
    return None, warnings


__all__ = ["EXTRAS", "VALIDATED", "check", "installed", "library_versions"]
