"""Where every number on screen came from, and whether the learner's stack matches it.

A result is one of: recorded on the H200 (a file in assets/reference, played back), a run on
the learner's GPU, a real run on the learner's CPU (usually small scale), or a simulation.
`mode` and `device` say which machine made it; whether it was *loaded* from a recording is
known only to whoever loaded it, so it is passed in.

Headless and cheap: versions come from package metadata (no torch import on the UI thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

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
    if r.mode == "cuda":
        return Source("your GPU", f"run on your GPU ({r.device.name}), {r.scale} scale", False)
    if r.mode == "cpu":
        return Source(f"your CPU ({r.scale})", f"run on your CPU, {r.scale} scale", False)
    return Source(f"simulated ({r.scale})",
                  f"simulated (exact tensor bytes, no GPU, no timing), {r.scale} scale", False)


def recorded_versions(r: RunResult) -> str:
    parts = []
    if r.torch_version:
        parts.append(f"torch {r.torch_version}")
    tf = getattr(r, "transformers_version", "") or ""
    parts.append(f"transformers {tf}" if tf else "transformers not recorded")
    return ", ".join(parts)


def local_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _base(version: str | None) -> str:
    return (version or "").split("+")[0]


def version_mismatch(recording: RunResult) -> str | None:
    """One sentence when the learner's torch/transformers differ from the recording's."""
    diffs = []
    for package, recorded in (("torch", recording.torch_version),
                              ("transformers", getattr(recording, "transformers_version", ""))):
        mine = local_version(package)
        if recorded and _base(mine) != _base(recorded):
            diffs.append(f"{package} {_base(mine) or '(not installed)'} "
                         f"(the recording: {_base(recorded)})")
    if not diffs:
        return None
    return ("This machine has " + " and ".join(diffs) + ": your own runs may differ slightly "
            "from the recording for that reason too.")


__all__ = ["CLASS", "LIVE", "RECORDING", "Source", "local_version", "recorded_versions", "source_of",
           "version_mismatch"]
