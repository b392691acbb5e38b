"""Where every number on screen came from, and whether the learner's stack matches it.

A result is one of: recorded on the H200 (a file in assets/reference, played back), a run on
the learner's GPU, a real run on the learner's CPU (usually small scale), or a simulation.
`mode` and `device` say which machine made it; whether it was *loaded* from a recording is
known only to whoever loaded it, so it is passed in.

Headless and cheap: versions come from the results themselves (no torch import on the UI
thread). The version rule: one line per lesson, shown only when the learner's run and the
recording took different code paths (`code_path_line`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from lab.measure.result import RunResult
from lab.report.provenance import code_path_note

RECORDING, LIVE, CLASS = "recording", "live", "class"  # CLASS: the instructor's run, pushed


@dataclass(frozen=True)
class Source:
    """Where a set of results came from: `short` for table headers, `long` for titles."""

    short: str
    long: str
    recorded: bool


def source_of(r: RunResult, how: str) -> Source:
    if how == CLASS:  # a served workshop: played back like a recording, labelled as his run
        from lab.serve.classroom import instructor_label

        return Source("instructor's run", instructor_label(r), True)
    if how == RECORDING:
        gpu = r.device.name or "GPU"
        short = "H200 recording" if "H200" in gpu else f"{gpu} recording"
        versions = recorded_versions(r)
        return Source(short, f"recorded on an {gpu}" + (f" ({versions})" if versions else ""),
                      True)
    if r.on_gpu:
        return Source("your GPU", f"run on your GPU ({r.device.name}), {r.scale} scale", False)
    if r.mode_info is not None and r.mode_info.simulated:
        return Source(f"simulated ({r.scale})",
                      f"simulated (exact tensor bytes, no GPU, no timing), {r.scale} scale", False)
    return Source(f"your CPU ({r.scale})", f"run on your CPU, {r.scale} scale", False)


def recorded_versions(r: RunResult) -> str:
    parts = []
    if r.torch_version:
        parts.append(f"torch {r.torch_version}")
    tf = getattr(r, "transformers_version", "") or ""
    parts.append(f"transformers {tf}" if tf else "transformers not recorded")
    return ", ".join(parts)


def _base(version: str | None) -> str:
    return (version or "").split("+")[0]


# ---- the version rule: one line per lesson, only when the code paths differ ----------------
# (lab.report.provenance.code_path_note: the same rule for the CLI and exports)
VERSION_NOTE_RE = re.compile(r"^(torch|transformers) \d")  # the engine's per-run version notes
code_path_line = code_path_note


def is_version_note(note: str) -> bool:
    """The engine's "torch X: …" / "transformers X: …" notes: the one version line says it."""
    return bool(VERSION_NOTE_RE.match(note))


__all__ = ["CLASS", "LIVE", "RECORDING", "Source", "code_path_line", "is_version_note",
           "recorded_versions", "source_of"]
