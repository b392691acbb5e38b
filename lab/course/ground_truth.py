"""The H200 ground truth as something a lesson can cite: assets/ground_truth/profile_h200.json.

bench/ground_truth/run_h200.py records plain scripts that never import the lab (the Hugging Face
loop bench/ground_truth/hf_loop.py, public training scripts), each in a fresh process on one
H200, and keeps per case the script's own `torch.cuda.max_memory_allocated()` /
`max_memory_reserved()` beside the torch and transformers it ran. A lesson whose variant runs
the same loop names its case in lesson.toml, and a claim with `source = "ground_truth"` is
checked against that case's numbers (lab.course.claims, `memlab dev check`) instead of against a
recording of the lesson itself:

    [[variants]]
    name = "baseline"
    ground_truth = "hf/gpt2/fp32"        # a case id of the file
    [[variants]]
    name = "small_batch"
    ground_truth = "fit/gpt2/fp32@2"     # a fit case's probe at batch 2

A probe of a fit case ran under the case's cap (`set_per_process_memory_fraction`); it is
citable only when the allocator never had to retry under it (`num_alloc_retries` 0), that is
when the cap changed nothing.

What the ground truth holds is fewer numbers than a recording: max allocated, max reserved and
the status (`QUANTITIES`). Torch-free, like lab.course.claims and lab.course.curriculum.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from lab.paths import REFERENCE_DIR

FILE_NAME = "profile_h200.json"
QUANTITIES = ("allocated", "reserved", "status")  # what a case records (lab.course.claims names them)
REF_RE = re.compile(r"^[a-z0-9][a-z0-9_.+/-]*(@[1-9]\d*)?$")


class GroundTruthError(LookupError):
    """A case reference the file cannot answer (one line)."""


def ground_truth_file(reference_root: Path | str | None = None) -> Path:
    """assets/ground_truth/profile_h200.json, beside the lesson recordings' folder."""
    root = Path(reference_root) if reference_root is not None else REFERENCE_DIR
    return root.parent / "ground_truth" / FILE_NAME


@dataclass(frozen=True)
class Peaks:
    """The allocator's two peaks, named as a RunResult's `allocator` names them (lab.course.claims)."""

    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    nvml_used_bytes: None = None


@dataclass(frozen=True)
class GroundTruthRun:
    """One recorded case (or a fit case's probe): what a claim may read, and where it came from."""

    case: str  # the reference as written: "hf/gpt2/fp32", "fit/gpt2/fp32@2"
    script: str
    args: tuple[str, ...]
    status: str
    max_allocated: int | None
    max_reserved: int | None
    gpu: str
    torch: str
    transformers: str
    recorded: str  # ISO date and time
    cap_gib: float | None = None  # a fit probe's cap

    @property
    def allocator(self) -> Peaks:
        return Peaks(self.max_allocated, self.max_reserved)

    @property
    def command(self) -> str:
        return " ".join(["python", self.script, *self.args])


def parse_ref(ref: str) -> tuple[str, int | None]:
    """"fit/gpt2/fp32@2" -> ("fit/gpt2/fp32", 2); "hf/gpt2/fp32" -> ("hf/gpt2/fp32", None)."""
    if not isinstance(ref, str) or not REF_RE.match(ref):
        raise GroundTruthError(f"ground_truth {ref!r}: a case id of {FILE_NAME} (e.g. "
                               "'hf/gpt2/fp32'), or a fit case's probe ('fit/gpt2/fp32@2')")
    case, _, batch = ref.partition("@")
    return case, int(batch) if batch else None


def load_cases(path: Path | str | None = None) -> dict[str, dict]:
    """case id -> its record; {} when the file is missing or unreadable (the check says so)."""
    p = Path(path) if path is not None else ground_truth_file()
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    cases = doc.get("cases") if isinstance(doc, dict) else None
    return cases if isinstance(cases, dict) else {}


def find(ref: str, cases: dict[str, dict]) -> GroundTruthRun:
    """The run `ref` names (GroundTruthError: no such case, no such probe, a probe the cap
    touched, a case that did not finish)."""
    case_id, batch = parse_ref(ref)
    rec = cases.get(case_id)
    if not isinstance(rec, dict):
        raise GroundTruthError(f"ground_truth {ref!r}: no case {case_id!r} in {FILE_NAME}")
    args, cap = list(rec.get("args") or []), None
    if batch is not None:
        probes = [p for p in rec.get("probes") or [] if p.get("batch") == batch]
        if not probes:
            raise GroundTruthError(f"ground_truth {ref!r}: case {case_id!r} has no probe at "
                                   f"batch {batch}")
        cap = rec.get("cap_gib")
        rec = {**probes[0], "script": rec.get("script", ""), "recorded": rec.get("recorded", "")}
        if rec.get("num_alloc_retries"):
            raise GroundTruthError(f"ground_truth {ref!r}: the allocator retried under the "
                                   f"{cap} GiB cap, so the peaks are not an uncapped run's")
        if "--batch" in args:
            args[args.index("--batch") + 1] = str(batch)
    status = str(rec.get("status", ""))
    if status not in ("ok", "oom"):
        raise GroundTruthError(f"ground_truth {ref!r}: the case's status is {status or '?'!r}")
    return GroundTruthRun(case=ref, script=str(rec.get("script", "")), args=tuple(map(str, args)),
                          status=status, max_allocated=rec.get("max_allocated"),
                          max_reserved=rec.get("max_reserved"), gpu=str(rec.get("gpu", "")),
                          torch=str(rec.get("torch", "")),
                          transformers=str(rec.get("transformers", "")),
                          recorded=str(rec.get("recorded", "")), cap_gib=cap)


def lesson_runs(lesson, reference_root: Path | str | None = None) -> dict[str, GroundTruthRun]:
    """variant -> its ground-truth run, for every variant of `lesson` that names a case and
    whose case the file answers (the check reports the others)."""
    named = {v.name: v.ground_truth for v in lesson.variants if v.ground_truth}
    if not named:
        return {}
    cases = load_cases(ground_truth_file(reference_root))
    out = {}
    for variant, ref in named.items():
        try:
            out[variant] = find(ref, cases)
        except GroundTruthError:
            continue
    return out


__all__ = ["FILE_NAME", "GroundTruthError", "GroundTruthRun", "Peaks", "QUANTITIES",
           "find", "ground_truth_file", "lesson_runs", "load_cases", "parse_ref"]
