"""The sim goldens: a fixed subset of sim runs whose numbers are checked in, exactly.

Sim is deterministic (fake tensors, a model of the allocator, no clock): the same code gives the
same bytes, run after run. So a change to the engine that moves no number must leave these files
equal to the byte, and a change that moves one must say why (`memlab dev goldens --why`, which
logs it in tests/goldens/sim/CHANGES.md). tests/unit/test_sim_goldens.py re-runs the subset and
compares every field, and compares each with its H200 recording at the bars of
docs/SIMULATION.md. The full course (83 variants) stays in bench/sim_vs_h200.py: the subset is
the part that fits in the test suite's time.

    SUBSET                 what runs, each with why it is there (the mechanisms it takes)
    run_entry(entry)       one entry in this process: its golden fields (the test's path)
    differences(g, got)    "field: golden X, got Y" for every field that differs
    (lab.dev.goldens_h200: where the fields miss the H200 recording's bars)

Lesson entries run as `memlab run LESSON --variant V --mode sim --scale seed` runs them: the
worker's steps (lab.runner.worker.measure_request: the lesson's parameters and checks, the
variant's environment), here in one process so the imports are paid once. The files are written
(lab.dev.goldens_regen) from the CLI's own path, a fresh worker per variant, and the same fields
from this in-process path must agree before anything is written.

One entry is not a lesson: the plain Hugging Face loop `memlab fit` simulates (no tracker on the
GPU, so autograd's in-place gradient accumulation, which a lesson run never takes), checked
against the H200 ground truth of bench/h200_ground_truth.py.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.paths import CHECKOUT_DIR

GOLDENS_DIR = CHECKOUT_DIR / "tests" / "goldens" / "sim"
PINS = CHECKOUT_DIR / ".ci" / "constraints.txt"  # the versions CI installs (and the goldens need)
FORMAT = 1  # of a golden file; change it when a field changes meaning
SCALE = "seed"  # the H200 recordings' scale


@dataclass(frozen=True)
class Entry:
    """A lesson variant in sim at seed scale, as `memlab run --mode sim` runs it."""

    lesson: str  # the lesson's id (its folder under assets/reference)
    variant: str
    why: str  # what it is in the subset for

    @property
    def name(self) -> str:
        return f"{self.lesson}/{self.variant}"

    @property
    def path(self) -> Path:
        return GOLDENS_DIR / self.lesson / f"{self.variant}.json"


@dataclass(frozen=True)
class PlainEntry:
    """`memlab fit`'s plain training loop of a shipped model config (lab.workloads.fit_sim),
    as the H200 ground truth ran it: `model(input_ids, labels).loss`, AdamW, two steps."""

    model: str
    combo: str  # as in assets/ground_truth ("fp32", "bf16", "bf16+ckpt")
    batch: int
    seq: int
    why: str
    lesson = "plain-hf-loop"

    @property
    def variant(self) -> str:
        return f"{self.model}-{self.combo.replace('+', '-')}-b{self.batch}"

    @property
    def name(self) -> str:
        return f"{self.lesson}/{self.variant}"

    @property
    def path(self) -> Path:
        return GOLDENS_DIR / self.lesson / f"{self.variant}.json"


# Fixed: change it only with `memlab dev goldens --why`. Chosen to take every mechanism of
# lab.dev.sim_probe.MECHANISMS at the least cost in seconds; where lessons take the same path,
# the cheaper variant is here.
SUBSET: tuple[Entry | PlainEntry, ...] = (
    Entry("caching-allocator", "baseline",
          "a cap: large rounded segments carved and split, free-every-other, a larger request: "
          "retry after freeing the cache, then out of memory"),
    Entry("caching-allocator", "empty_cache", "empty_cache() before the larger request"),
    Entry("caching-allocator", "expandable_segments",
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: pages mapped, unmapped at the retry"),
    Entry("caching-allocator", "empty_cache_first", "empty_cache() before carving: fits"),
    Entry("out-of-memory", "baseline",
          "a GPT-2 training step out of memory under 16 GiB, after a retry"),
    Entry("mixed-precision", "baseline",
          "GPT-2 fp32 training: mem-efficient attention and its scratch, bias "
          "gradients' reduction staging, cuBLAS/cuBLASLt workspaces, HF masks on fake tensors"),
    Entry("mixed-precision", "bf16",
          "autocast bf16: CUDA's op lists, the weight cache, cuDNN attention and its scratch"),
    Entry("inference-no-grad", "inference_mode",
          "inference_mode: the tracker runs SDPA CUDA's way itself"),
    Entry("activation-memory", "math",
          "Qwen2 bf16 with sdpa_kernel(MATH): the ported math composite, _safe_softmax's parts"),
    Entry("training-cycle", "seed_loop_b2",
          "torch.optim.AdamW(params) at its default: foreach as on CUDA; Qwen2 fp32 "
          "grouped-query attention chooses math"),
    Entry("low-memory-optimizers", "adafactor",
          "torch.optim.Adafactor under run.stand_in_values: .item() stand-ins"),
    Entry("many-gpus", "fsdp",
          "FSDP2 on 2 simulated ranks: all-gather / reduce-scatter streams, each with its own "
          "free blocks"),
    Entry("allocator-tuning", "max_split_size",
          "max_split_size_mb:200 under a 3 GiB cap: large blocks kept whole; torch.cuda's "
          "memory_stats() from the model"),
    Entry("allocator-tuning", "growing_gc",
          "garbage_collection_threshold:0.5: cached blocks freed before a new segment, no retries"),
    Entry("allocator-tuning", "growing_roundup",
          "roundup_power2_divisions:4: requests rounded to their interval's divisions"),
    Entry("offloading", "save_on_cpu",
          "torch.autograd.graph.save_on_cpu: saved tensors to pinned host memory and back"),
    PlainEntry("gpt2", "fp32", 8, 1024,
               "memlab fit's plain loop: no tracker on the GPU, so backward accumulates a "
               "tensor's two gradients in place; GPT-2's config has dropout 0.1 (the lessons' "
               "models have none): CUDA's fused dropout"),
)


def entry(name: str) -> Entry | PlainEntry:
    for e in SUBSET:
        if e.name == name:
            return e
    raise KeyError(f"no golden entry {name!r}; the subset: {', '.join(e.name for e in SUBSET)}")


# ---- running ---------------------------------------------------------------------------------
def sim_mode() -> str:
    """The simulated mode's name, from the one mode rule (lab.measure.modes)."""
    from lab.measure.modes import choose

    return choose("sim", SCALE, gpu=None).mode


def lesson_of(e: Entry):
    from lab.course.curriculum import load_course

    return load_course().find(e.lesson)


def run_entry(e: Entry | PlainEntry) -> dict[str, Any]:
    """The entry's golden fields, run in this process."""
    if isinstance(e, PlainEntry):
        return plain_fields(_record_plain(e))
    return result_fields(run_result(e))


def run_result(e: Entry):
    """The lesson variant's RunResult, run in this process as `memlab run LESSON --variant V
    --mode sim` asks a worker for it (the variant's environment set before the experiment is
    imported, as the worker sets it)."""
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    req = RunRequest.for_lesson(lesson_of(e), e.variant, sim_mode(), SCALE, timing=True)
    return measure_request(req)


def run_probed(e: Entry | PlainEntry) -> tuple[dict[str, Any], list[str], bool]:
    """`run_entry` under lab.dev.sim_probe: (fields, mechanisms taken, built a transformers
    model)."""
    return probed(e)[1:]


def probed(e: Entry | PlainEntry):
    """`run_probed` with the RunResult first (None for a PlainEntry): the suite shares a lesson
    variant's run between its golden test and the lesson's own tests."""
    from lab.dev.sim_probe import Probe

    with Probe() as probe:
        if isinstance(e, PlainEntry):
            result, fields = None, run_entry(e)
        else:
            result = run_result(e)
            fields = result_fields(result)
    return result, fields, probe.taken(fields), probe.used_transformers


def run_probed_by_name(name: str) -> tuple[dict[str, Any], list[str], bool]:
    """`run_probed` of the entry called `name`: a picklable call, for a process of its own."""
    return run_probed(entry(name))


def probed_by_name(name: str):
    """`probed` of the entry called `name` (the RunResult first): picklable, as above."""
    return probed(entry(name))


def run_probed_apart(name: str) -> tuple[dict[str, Any], list[str], bool]:
    """`run_probed` in a child forked from a forkserver that imported only the lab: what an
    earlier run in this process left behind (a global hook, a patch, a reference held) cannot
    move a golden's numbers. The lab's own runs get the same from the runner's forked workers."""
    return probed_apart(name)[1:]


def probed_apart(name: str):
    """`run_probed_apart` with the RunResult first (None for a PlainEntry): the suite's one sim
    run of a golden lesson variant, which the lesson's own tests read too.

    One child serves every golden this process asks for, one after another, as `memlab dev
    goldens --check` runs them all in one process: a fresh child per golden paid transformers'
    import and sim's warm-up each time (~6 s against ~0.3 s)."""
    from concurrent.futures.process import BrokenProcessPool

    global _APART
    if _APART is None:
        from concurrent.futures import ProcessPoolExecutor

        _APART = ProcessPoolExecutor(max_workers=1, mp_context=_forkserver())
    try:
        return _APART.submit(probed_by_name, name).result()
    except BrokenProcessPool:
        _APART = None  # the child died (killed, out of memory): the next golden gets a new one
        raise


_APART = None
_FORKSERVER = None


def _forkserver():
    global _FORKSERVER
    if _FORKSERVER is None:
        import multiprocessing

        _FORKSERVER = multiprocessing.get_context("forkserver")
        _FORKSERVER.set_forkserver_preload(["lab.dev.goldens", "lab.dev.sim_probe", "torch"])
    return _FORKSERVER


def _record_plain(e: PlainEntry):
    from lab.workloads import parse_combo
    from lab.workloads.fit_sim import sim_recorder

    # as bench/sim_vs_ground_truth.py asks it ("fp32" is the combination "baseline")
    sizes = {"model": e.model, "batch": 1, "seq": e.seq, "steps": 2}
    return sim_recorder(e.model, sizes, parse_combo(e.combo.replace("fp32", "baseline")))(e.batch)


def result_fields(r) -> dict[str, Any]:
    """What a golden keeps of a RunResult: every number sim makes that a change could move."""
    a = r.allocator
    return {
        "status": r.status,
        "error": r.error,
        "peak": {"bytes": r.peak.bytes, "phase": r.peak.phase,
                 "by_category": dict(sorted(r.peak.by_category.items()))},
        "allocator": None if a is None else {
            "peak_allocated_bytes": a.peak_allocated_bytes,
            "peak_reserved_bytes": a.peak_reserved_bytes,
            "end_allocated_bytes": a.end_allocated_bytes,
            "end_reserved_bytes": a.end_reserved_bytes,
            "num_alloc_retries": a.num_alloc_retries,
            "num_ooms": a.num_ooms,
        },
        "phases": [{"name": p.name, "delta_bytes": p.delta_bytes, "peak_bytes": p.peak_bytes}
                   for p in r.phases],
        "checks": [{"name": c.name, "measured_bytes": c.measured_bytes} for c in r.checks],
    }


def plain_fields(rec) -> dict[str, Any]:
    """What a golden keeps of a SimRecord: its numbers and the allocation sequence's digest
    (every request's size and stream, every free by which request it frees)."""
    born: dict[Any, int] = {}
    steps = []
    for ev in rec.log:
        if ev[0] == "alloc":
            born[ev[1]] = len(born)
            steps.append(["alloc", ev[2], ev[3] if len(ev) > 3 else 0])
        elif ev[0] == "free":
            steps.append(["free", born.get(ev[1], -1)])
        else:
            steps.append(list(ev))
    digest = hashlib.sha256(json.dumps(steps, separators=(",", ":")).encode()).hexdigest()
    return {
        "status": rec.status,
        "error": rec.error,
        "peak": {"bytes": rec.tracked_peak_bytes},
        "allocator": {"peak_allocated_bytes": rec.peak_allocated_bytes,
                      "peak_reserved_bytes": rec.peak_reserved_bytes},
        "allocations": len(born),
        "events": len(steps),
        "events_sha256": digest,
    }


def versions() -> dict[str, str]:
    """torch and transformers as installed here (package metadata: no import), and Python."""
    out = {}
    for name in ("torch", "transformers"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = ""
    out["python"] = ".".join(map(str, sys.version_info[:3]))
    return out


def pinned() -> dict[str, str]:
    """name -> version pinned in .ci/constraints.txt (`name==version` lines)."""
    out = {}
    for line in PINS.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            out[name.strip().lower()] = version.strip()
    return out


def base_version(v: str) -> str:
    return v.split("+")[0]  # "2.13.0+cpu" is torch 2.13.0


# ---- files -----------------------------------------------------------------------------------
def load_golden(e: Entry | PlainEntry) -> dict | None:
    return json.loads(e.path.read_text(encoding="utf-8")) if e.path.is_file() else None


def golden_document(e: Entry | PlainEntry, fields: dict, mechanisms: list[str],
                    used_transformers: bool, made_with: dict[str, str]) -> dict:
    doc = {
        "format": FORMAT,
        "golden": e.name,
        "why": e.why,
        "made_with": made_with,
        "depends_on_transformers": used_transformers,
    }
    if used_transformers:
        doc["transformers_note"] = (
            "this run builds a transformers model: model code moves between transformers "
            "versions, so its numbers are exact only with the version above (docs/SIMULATION.md)")
    doc["mechanisms"] = mechanisms
    doc["sim"] = fields
    return doc


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1) + "\n"


# ---- comparing -------------------------------------------------------------------------------
def _flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{path}.{k}" if path else str(k)))
        return out or {path: {}}
    if isinstance(value, list):
        out = {f"{path}.length": len(value)}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def differences(golden: dict, got: dict) -> list[tuple[str, Any, Any]]:
    """(field, golden, got) for every field of `golden` and `got` that differs (nested fields
    by path: "peak.by_category.activations", "phases[3].delta_bytes")."""
    g, n = _flatten(golden), _flatten(got)
    missing = object()
    out = []
    for key in list(g) + [k for k in n if k not in g]:
        a, b = g.get(key, missing), n.get(key, missing)
        if a != b or type(a) is not type(b):
            out.append((key, None if a is missing else a, None if b is missing else b))
    return out


__all__ = ["Entry", "GOLDENS_DIR", "PlainEntry", "SUBSET", "differences", "entry",
           "golden_document", "load_golden", "pinned", "probed", "probed_apart", "probed_by_name",
           "result_fields", "run_entry", "run_probed", "run_probed_apart", "run_probed_by_name",
           "run_result", "versions"]
