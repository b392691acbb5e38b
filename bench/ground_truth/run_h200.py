"""Record the ground truth on a CUDA GPU: every case of cases.py not yet in the results file.

    python bench/ground_truth/run_h200.py [--suite profile|zoo] [--only GLOB,...] [--shard I/N]
        [--budget-s S] [--results FILE] [--out DIR] [--retry-errors]
    python bench/ground_truth/run_h200.py --dry-run      every case, tiny, on this CPU

Two suites share this runner: `profile` (the default; cases.all_cases(), results
assets/ground_truth/profile_h200.json, recorded on an H200) and `zoo` (the practitioner zoo,
cases.zoo_cases(), results assets/ground_truth/zoo_gpu.json, on whichever card the device gives:
each case names its card, and sim is compared on that card).

Resumable: results are merged into FILE (default assets/ground_truth/profile_h200.json) after
every case, and a case already there is skipped, so a device command that stops at its time
limit loses nothing; copy FILE back (it is also written to --out DIR, the device's $OUT) and
run again. `--budget-s`: start no case after S seconds (running ones finish), so each device
command ends well inside its 10 minutes.

Every case runs in a fresh process (`peak_of.py -- SCRIPT ARGS`, a clean caching allocator),
several at once on the one GPU while their estimated GiB fit in --gib-budget. Two processes
never change each other's counters, except when one's cudaMalloc fails and it flushes its cache
(a retry): a case that ran beside others and shows a retry or an OOM is run again alone. Fit
cases bisect the largest batch under `torch.cuda.set_per_process_memory_fraction(cap)`.

Public scripts come from .gt_scripts/ (prepare.py). The transformers the simulator runs is
carried as wheels (PYTHONPATH); `versions/*` cases drop it and run on the machine's own.
"""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import json
import os
import platform
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import (ROOT, SOURCES, SUITES, ZOO_RESULTS, Case, half_of, load_split,  # noqa: E402
                   with_batch)
from peak_of import MARK  # noqa: E402

PEAK_OF = Path(__file__).resolve().with_name("peak_of.py")
RESULTS = ROOT / "assets" / "ground_truth" / "profile_h200.json"
GiB = 2**30
CASE_TIMEOUT_S = 200
TIMEOUT_S = [CASE_TIMEOUT_S]  # --case-timeout
# GiB a script case may need (an estimate for scheduling only; hf cases are estimated from their
# parameter count); a wrong guess costs a re-run alone, never a wrong number
SCRIPT_GIB = {"script/nanogpt/eager": 18, "script/nanogpt/compiled": 16,
              "script/nanogpt/medium-fp16": 30, "script/hf_trainer/gpt2-bf16": 18,
              "script/hf_trainer/qwen3-ckpt": 16, "script/titan/llama3-bf16": 36,
              "script/titan/llama3-fp32-ac": 32, "script/wlm/transformer": 20,
              "script/wlm/lstm": 8}


class Gate:
    """Admit a case when its GiB fit in what the running cases leave; `alone` waits for all.
    `run` also says whether any other case ran at any moment of this one (`beside`)."""

    def __init__(self, budget: float):
        self.budget = self.free = budget
        self.cond = threading.Condition()
        self.running: dict[int, bool] = {}  # token -> another case overlapped it
        self.tokens = itertools.count()

    def run(self, gib: float, fn, *args, alone: bool = False, **kw):
        need = self.budget if alone else min(gib, self.budget)
        with self.cond:
            self.cond.wait_for(lambda: self.free >= need)
            self.free -= need
            token = next(self.tokens)
            for other in self.running:
                self.running[other] = True
            self.running[token] = bool(self.running)  # others were already running
        try:
            return fn(*args, **kw), self.running[token]
        finally:
            with self.cond:
                self.free += need
                del self.running[token]
                self.cond.notify_all()


_ESTIMATING = threading.Lock()  # one meta-device build at a time (lazy imports, caches)


def estimate_gib(case: Case) -> float:
    if case.gib is not None:
        return case.gib
    if case.kind == "script":
        return SCRIPT_GIB.get(case.id, 24)
    with _ESTIMATING:
        return _estimate_hf(case)


def _estimate_hf(case: Case) -> float:
    import torch
    from hf_loop import load_config
    from transformers import AutoModelForCausalLM

    a = dict(zip(case.args[::2], case.args[1::2]))
    cfg = load_config(str(ROOT / a["--config"]), int(a["--layers"]) if "--layers" in a else None,
                      False)
    with torch.device("meta"):
        params = sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())
    tokens = int(a["--batch"]) * int(a["--seq"])
    act = 6 if "ckpt" in a["--combo"] else 48
    b = params * 16 + tokens * (cfg.hidden_size * cfg.num_hidden_layers * act
                                + cfg.vocab_size * 16)
    return round(1.3 * b / GiB + 1.5, 1)


def run_one(case: Case, args: list[str], *, cap_gib: float | None, dry: bool) -> dict:
    timeout = TIMEOUT_S[0]
    cmd = [sys.executable, str(PEAK_OF)] + (["--cap-gib", str(cap_gib)] if cap_gib else []) \
        + ["--", str(ROOT / case.script), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    if case.transformers == "native":  # the machine's own transformers: drop the carried one
        env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                            if p and p != os.environ.get("GT_CARRIED_SITE"))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT / case.cwd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": round(time.time() - t0, 1)}
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:300]
        return {"status": "error", "error": f"no result (exit {p.returncode}): {tail}",
                "seconds": round(time.time() - t0, 1)}
    out = json.loads(line[len(MARK):])
    if out["status"] == "error":
        out["stderr_tail"] = "\n".join(p.stderr.strip().splitlines()[-6:])[-1500:]
    out["seconds"] = round(time.time() - t0, 1)
    return out


def peak_case(case: Case, gate: Gate, dry: bool) -> dict:
    gib = 1 if dry else estimate_gib(case)
    args = case.tiny if dry else case.args
    r, beside = gate.run(gib, run_one, case, args, cap_gib=None, dry=dry,
                         alone=case.alone and not dry)
    r["ran_alone"] = not beside
    if not dry and beside and (r["status"] == "oom" or r.get("num_alloc_retries", 0)):
        r, _ = gate.run(gib, run_one, case, args, cap_gib=None, dry=dry, alone=True)
        r["ran_alone"] = True
    return {**r, "est_gib": gib}


def fit_case(case: Case, gate: Gate, dry: bool) -> dict:
    """The largest batch that runs under the cap: batches 1 and 2 give a line, the batches around
    its guess run side by side, bisection finishes."""
    if dry:
        r, _ = gate.run(1, run_one, case, case.tiny, cap_gib=None, dry=True)
        return {**r, "largest_batch": None}
    cap = case.cap_gib
    probes: dict[int, dict] = {}

    def run_many(batches: list[int]) -> None:
        todo = [b for b in dict.fromkeys(batches) if b >= 1 and b not in probes]
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            futs = {b: pool.submit(gate.run, cap, run_one, case, with_batch(case, b),
                                   cap_gib=cap, dry=False) for b in todo}
            for b, f in futs.items():
                probes[b] = {"batch": b, **f.result()[0]}

    ok = lambda b: probes[b]["status"] == "ok"  # noqa: E731
    run_many([1, 2])
    if ok(1) and ok(2):
        slope = max(1, probes[2]["max_allocated"] - probes[1]["max_allocated"])
        guess = min(4096, 2 + int((cap * GiB - probes[2]["max_allocated"]) // slope))
        run_many([guess - 1, guess, guess + 1])
    while True:
        good = max([b for b in probes if ok(b)], default=0)
        bad = min([b for b in probes if not ok(b) and b > good], default=None)
        if (bad is not None and bad - good <= 1) or len(probes) > 16:
            break
        run_many([good * 2] if bad is None else [(good + bad) // 2])
    errors = [p for p in probes.values() if p["status"] not in ("ok", "oom")]
    return {"status": "error" if errors else "ok", "largest_batch": good, "first_oom_batch": bad,
            "cap_gib": cap, "probes": [probes[b] for b in sorted(probes)],
            **({"error": errors[0].get("error", "")} if errors else {})}


def _versions(carried: bool, dist: str = "transformers") -> str | None:
    env = dict(os.environ)
    if not carried:
        env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                            if p and p != os.environ.get("GT_CARRIED_SITE"))
    p = subprocess.run([sys.executable, "-c", "from importlib.metadata import version as v; "
                        f"print(v({dist!r}))"], env=env, capture_output=True, text=True)
    return p.stdout.strip() or None


def load(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {"schema": 1, "about": "memlab ground truth: bench/ground_truth/run_h200.py; cases "
            "and split in bench/ground_truth/cases.py and assets/ground_truth/split.toml",
            "runs": [], "cases": {}}


def save(doc: dict, path: Path, out: Path | None) -> None:
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / path.name).write_text(text)


def merge(files: list[Path], into: Path) -> int:
    """Cases and runs of several results files, the later file winning per case."""
    doc = load(into)
    for f in files:
        d = json.loads(f.read_text())
        doc["cases"].update(d["cases"])
        doc["runs"] += [r for r in d.get("runs", []) if r not in doc["runs"]]
        doc["sources"] = d.get("sources", doc.get("sources"))
    save(doc, into, None)
    print(f"run_h200: {len(doc['cases'])} cases in {into}")
    return 0


def select(cases: list[Case], only: str | None, shard: str | None) -> list[Case]:
    if only:
        globs = [g for g in only.split(",") if g]
        cases = [c for c in cases if any(fnmatch.fnmatch(c.id, g) for g in globs)]
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        cases = [c for k, c in enumerate(cases) if k % n == i]
    return cases


def row(case: Case, r: dict) -> str:
    if case.kind == "fit":
        return (f"{case.id:<38} {r['status']:<7} largest batch {r.get('largest_batch')} under "
                f"{case.cap_gib} GiB (first OOM {r.get('first_oom_batch')}) "
                f"{len(r.get('probes', []))} probes")
    alloc, res = r.get("max_allocated"), r.get("max_reserved")
    nums = (f"alloc {alloc / 1e9:8.3f} GB  reserved {res / 1e9:8.3f} GB" if alloc is not None
            else "(no CUDA: dry run)")
    return (f"{case.id:<38} {r['status']:<7} {nums}  {r.get('seconds', 0):5.1f} s  "
            f"{r.get('error', '')[:90]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="profile",
                    help="profile: the H200 cases (default); zoo: the practitioner zoo")
    ap.add_argument("--only", help="comma-separated globs of case ids, e.g. 'hf/*,fit/*'")
    ap.add_argument("--shard", help="I/N: every N-th case starting at I")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the results here ($OUT)")
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--gib-budget", type=float, default=None,
                    help="GiB the cases running at once may need (default: 85 %% of the card)")
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--retry-errors", action="store_true")
    ap.add_argument("--case-timeout", type=float, default=CASE_TIMEOUT_S, metavar="S")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="FILE",
                    help="merge these results files (the device's $OUT copies) into --results")
    ap.add_argument("--dry-run", action="store_true", help="every case tiny on this CPU")
    args = ap.parse_args()
    dry = args.dry_run
    if args.merge:
        return merge(args.merge, args.results or (ZOO_RESULTS if args.suite == "zoo" else RESULTS))
    default = ZOO_RESULTS if args.suite == "zoo" else RESULTS
    results = args.results or (Path(f"/tmp/gt_dry_run_{args.suite}.json") if dry else default)
    TIMEOUT_S[0] = args.case_timeout
    split = load_split()
    cases = select(SUITES[args.suite](), args.only, args.shard)
    doc = load(results)
    if not dry:
        import torch

        if not torch.cuda.is_available():
            print("run_h200: no CUDA GPU (use --dry-run on a CPU)", file=sys.stderr)
            return 2
    missing = [c for c in cases if c.id not in doc["cases"] or (
        args.retry_errors and doc["cases"][c.id]["status"] not in ("ok", "oom"))]
    for c in cases:
        if c.script.startswith(".gt_scripts/") and not (ROOT / c.script).exists():
            print(f"run_h200: {c.script} is missing: run bench/ground_truth/prepare.py here and "
                  "carry .gt_scripts", file=sys.stderr)
            return 2
    import torch

    run = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "torch": torch.__version__, "python": platform.python_version(),
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (dry run)",
           "transformers_carried": _versions(True), "transformers_native": _versions(False),
           "cases": len(missing), "dry_run": dry, "suite": args.suite}
    if args.suite == "zoo":  # the optional libraries the zoo's scripts import
        run["libraries"] = {d: _versions(True, d) for d in ("peft", "pytorch-lightning",
                                                            "accelerate")}
    doc["runs"].append(run)
    doc["sources"] = SOURCES
    print(f"run_h200: {len(missing)} of {len(cases)} cases to run on {run['gpu']} "
          f"(torch {run['torch']}, transformers {run['transformers_carried']} carried, "
          f"{run['transformers_native']} native)", flush=True)
    # long ones first: compiled scripts and fit bisections take several rounds
    missing.sort(key=lambda c: (c.kind != "fit", "compiled" not in c.id, c.kind != "script"))
    budget = args.gib_budget or (0.85 * torch.cuda.get_device_properties(0).total_memory / GiB
                                 if torch.cuda.is_available() else 4)
    gate = Gate(4 if dry else budget)
    lock, t0 = threading.Lock(), time.time()

    def one(case: Case) -> None:
        if time.time() - t0 > args.budget_s:
            return
        r = fit_case(case, gate, dry) if case.kind == "fit" else peak_case(case, gate, dry)
        entry = {"id": case.id, "half": half_of(case, split), "group": case.group,
                 **({"category": case.category} if case.kind == "zoo" else {}),
                 "script": case.script, "cwd": case.cwd, "args": case.tiny if dry else case.args,
                 **({"cap_gib": case.cap_gib} if case.cap_gib else {}),
                 **({"source": SOURCES[case.info["source"]]["repo"],
                     "commit": SOURCES[case.info["source"]]["commit"],
                     "data": case.info.get("data")} if "source" in case.info else {}),
                 "transformers_side": case.transformers, **r,
                 "recorded": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        with lock:
            doc["cases"][case.id] = entry
            save(doc, results, args.out)
            print(row(case, r), flush=True)

    with ThreadPoolExecutor(max_workers=2 if dry else args.workers) as pool:
        list(pool.map(one, missing))
    run["seconds"] = round(time.time() - t0, 1)
    left = [c.id for c in cases if c.id not in doc["cases"]]
    run["left"] = len(left)
    save(doc, results, args.out)
    bad = [c.id for c in cases if doc["cases"].get(c.id, {}).get("status") not in ("ok", "oom",
                                                                                    None)]
    print(f"run_h200: {run['seconds']} s; {len(left)} cases left for the next command"
          + (f"; failed: {', '.join(bad)}" if bad else "") + f"; results in {results}")
    return 1 if (dry and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
