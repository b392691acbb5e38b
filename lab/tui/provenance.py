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
# The engine names the code path a run took where versions choose one (the attention kernel,
# the optimizer's implementation). Until every result carries them, the versions stand in.
CODE_PATHS = (("attention_impl", "attention"), ("optimizer_impl", "optimizer"))
VERSION_NOTE_RE = re.compile(r"^(torch|transformers) \d")  # the engine's per-run version notes


def _minor(version: str) -> str:
    return ".".join(_base(version).split(".")[:2])


def code_path_line(mine: Iterable[RunResult], recording: Iterable[RunResult]) -> tuple[str, ...] | None:
    """(long, …, short) forms of the one line saying where the learner's run and the recording took different code
    paths; None when they took the same ones (or there is nothing to compare)."""
    mine, recorded = list(mine), {r.variant: r for r in recording}
    pairs = [(r, recorded[r.variant]) for r in mine if r.variant in recorded]
    if not pairs:
        return None
    named = False
    differ: dict[str, set[str]] = {}
    for a, b in pairs:
        for attr, what in CODE_PATHS:
            x, y = getattr(a, attr, None), getattr(b, attr, None)
            if x is None or y is None:
                continue
            named = True
            if x != y:
                differ.setdefault(f"{what} {x} (the recording: {y})", set()).add(a.variant)
    if named:
        if not differ:
            return None
        parts = [f"{what} in {', '.join(sorted(vs))}" for what, vs in differ.items()]
        long = "Your run took other code paths than the recording: " + "; ".join(parts) + "."
        short = "Other code paths than the recording: " + "; ".join(differ) + "."
        shortest = "Other paths than the recording: " + ", ".join(
            what.split(" ")[0] for what in differ)
        return long, short, shortest
    # fallback: the versions that choose those paths
    a, b = pairs[0]
    diffs = []
    for package, x, y in (("torch", a.torch_version, b.torch_version),
                          ("transformers", a.transformers_version, b.transformers_version)):
        if x and y and _minor(x) != _minor(y):
            diffs.append((package, _minor(x), _minor(y)))
    if not diffs:
        return None
    long = ("Versions: your run " + ", ".join(f"{p} {x}" for p, x, _ in diffs) + "; the recording "
            + ", ".join(f"{y}" for _, _, y in diffs) + ": the code paths (attention, optimizer) "
            "may differ.")
    short = (", ".join(f"{p} {x}" for p, x, _ in diffs) + " here; "
             + ", ".join(y for _, _, y in diffs) + " recorded: code paths may differ")
    shortest = (", ".join(f"{p} {x}" for p, x, _ in diffs) + " here; "
                + ", ".join(y for _, _, y in diffs) + " recorded: paths may differ")
    return long, short, shortest


def is_version_note(note: str) -> bool:
    """The engine's "torch X: …" / "transformers X: …" notes: the one version line says it."""
    return bool(VERSION_NOTE_RE.match(note))


__all__ = ["CLASS", "LIVE", "RECORDING", "Source", "code_path_line", "is_version_note",
           "recorded_versions", "source_of"]
