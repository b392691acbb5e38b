"""GPU ground truth for `memlab view`'s out-of-memory replay (issue 40).

    python bench/oom_replay_gpu.py --out DIR            on a CUDA GPU: about a minute
    python bench/oom_replay_gpu.py --out DIR --cpu      here: every job's code, tiny, on the CPU
    python bench/oom_replay_gpu.py --merge FILE.tar.gz  here: the fixtures from a GPU run, compared
    python bench/oom_replay_gpu.py --check              here: the committed fixtures, compared

Each case is a program that runs out of memory under a memory cap
(`torch.cuda.set_per_process_memory_fraction`), recorded with the allocator's history and the
lab's own out-of-memory observer (lab.measure.cuda_allocator.MemoryRecorder: the snapshot is taken at the
failing allocation, the cap read from the observer):

  holes        many mid-sized tensors cut from cached big blocks, every other one freed, then a
               big request: fragmentation
  growing      a growing activation per step (sequence lengths growing) while a small tensor per
               step is kept: the kept ones pin the freed blocks; fragmentation
  training     a real training loop (an nn.TransformerEncoder, AdamW) whose batch grows each step
               until it fails near the cap; also recorded with a short ring buffer
               (`training_ring`: the trace's start is rebuilt from the snapshot's segments)
  shortage     live tensors that do not fit the cap whatever the layout
  streams      blocks cached on a side stream, a `record_stream` free, then a request on the
               default stream: each stream keeps its own blocks
  lesson23     lesson 23's baseline through the lab's engine (`measure_request`, cuda mode, seed
               scale, the snapshot it writes): the capture `memlab run --snapshot` makes

Then every case runs again in a fresh process under each setting the replay tries
(lab.snapshots.replay.candidates: expandable_segments, max_split_size_mb, garbage_collection_
threshold), with the history on, and says whether the request that failed was served this time
(the program's allocations are the same whatever the settings: the k-th allocation is matched,
its size checked) and the peak reserved up to it.

Writes DIR/oom_cases.tar.gz (every snapshot gzipped, each job's JSON) and DIR/log.txt.
`--merge` writes tests/fixtures/oom_cases/ (the snapshots cut to what the replay and the view
read, gzipped; reruns.json) and assets/reference/allocator-tuning/baseline.profile.pkl.gz (lesson
23's, for its lesson step), then prints the replay against the reruns: verdicts and peak reserved
(target: every verdict equal, peaks within 3 %). tests/unit/test_oom_gpu_cases.py checks the same.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MiB, GiB = 1 << 20, 1 << 30
FIXTURES = ROOT / "tests" / "fixtures" / "oom_cases"
LESSON_ASSET = ROOT / "assets" / "reference" / "allocator-tuning" / "baseline.profile.pkl.gz"
DEADLINE_S = 110  # the whole run: jobs not started by then are skipped (and named)
JOB_TIMEOUT_S = 45
WORKERS = 8  # jobs at a time: each under its own cap (<= 6.5 GiB + its context), 8 fit an H100
RING = 1500  # training_ring's max_entries: short enough to drop the program's start
# the settings each case is rerun under: what lab.snapshots.replay tries for a run with the
# default settings under a cap (checked against it in --merge)
SETTINGS = ["expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:256",
            "max_split_size_mb:512", "garbage_collection_threshold:0.6",
            "garbage_collection_threshold:0.8"]


# ---- the cases: plain torch, deterministic, `unit` bytes = 1 MiB on a GPU, 1 KiB on the CPU -----
def case_holes(dev, unit):
    import torch

    u8 = dict(dtype=torch.uint8, device=dev)
    big = [torch.empty(512 * unit, **u8) for _ in range(12)]  # twelve segments of 512
    del big  # cached
    mids = [torch.empty(200 * unit, **u8) for _ in range(24)]  # two cut from each cached 512
    del mids[::2]  # every other one freed: a hole beside a live block in every segment
    return torch.empty(1024 * unit, **u8)  # no block is large enough; the segments are pinned


def case_growing(dev, unit):
    import torch

    u8 = dict(dtype=torch.uint8, device=dev)
    kept = []
    for t in range(1, 60):
        act = torch.empty((256 + 64 * t) * unit, **u8)  # this step's activation, a little longer
        tmp = torch.empty((128 + 32 * t) * unit, **u8)
        kept.append(torch.empty(6 * unit, **u8))  # a small tensor kept per step (a cache entry)
        del act, tmp
    return kept


def case_shortage(dev, unit):
    import torch

    u8 = dict(dtype=torch.uint8, device=dev)
    live = [torch.empty(1024 * unit, **u8) for _ in range(4)]
    live.append(torch.empty(2048 * unit, **u8))  # 6 GiB live under a 5 GiB cap
    return live


def case_streams(dev, unit):
    import torch

    u8 = dict(dtype=torch.uint8, device=dev)
    side = torch.cuda.Stream() if dev.type == "cuda" else None
    with torch.cuda.stream(side) if side is not None else _nothing():
        big = [torch.empty(512 * unit, **u8) for _ in range(8)]
        del big  # cached for the side stream only
        pinned = [torch.empty(300 * unit, **u8) for _ in range(8)]  # cut from them: pinned
    x = torch.empty(64 * unit, **u8)  # made on the default stream, used on the side stream
    if side is not None:
        x.record_stream(side)
    del x  # free_requested now, free_completed once the side stream's work is done
    y = torch.empty(2048 * unit, **u8)  # the default stream cannot use the side stream's blocks
    return pinned, y


def case_training(dev, unit, steps: int = 12):
    import torch
    from torch import nn

    torch.manual_seed(0)
    small = unit < MiB
    d, layers, seq = (64, 2, 32) if small else (1024, 6, 512)
    layer = nn.TransformerEncoderLayer(d, 16 if not small else 4, 4 * d, dropout=0.0,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(dev)
    opt = torch.optim.AdamW(model.parameters())
    metadata = getattr(torch.cuda.memory, "_set_memory_metadata", None) if dev.type == "cuda" else None
    for step in range(steps):
        batch = 4 + 4 * step  # the batch grows until it does not fit
        if metadata is not None:
            try:  # a 2026 field: user_metadata on each entry (private API: never fail the case)
                metadata(f"step {step} batch {batch}")
            except Exception:  # noqa: BLE001
                metadata = None
        x = torch.randn(batch, seq, d, device=dev)
        model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


CASES = {  # name -> (function, cap in MiB, max_entries)
    "holes": (case_holes, 6656, 100_000),
    "growing": (case_growing, 6144, 100_000),
    "training": (case_training, 6144, 1_000_000),
    "training_ring": (case_training, 6144, RING),
    "shortage": (case_shortage, 5120, 100_000),
    "streams": (case_streams, 5120, 100_000),
}
RERUN_AS = {"training_ring": "training"}  # the same program and cap: its reruns are training's


# ---- one job, in a process of its own (PYTORCH_CUDA_ALLOC_CONF set before torch starts) ----------
def job_case(case: str, out: Path, record: bool, cpu: bool) -> dict:
    import torch

    fn, cap_mib, entries = CASES[case]
    dev = torch.device("cpu" if cpu else "cuda", None if cpu else 0)
    unit = 1024 if cpu else MiB
    d: dict = {"case": case, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
               "torch": torch.__version__, "record": record}
    if cpu:
        d["status"] = _status(lambda: fn(dev, unit))
        return d
    from lab.measure.cuda_allocator import MemoryRecorder

    total = torch.cuda.get_device_properties(0).total_memory
    cap = cap_mib * MiB
    torch.cuda.set_per_process_memory_fraction(cap / total, 0)
    rec = MemoryRecorder(max_entries=entries)
    rec.start()
    d["status"] = _status(lambda: fn(dev, unit), d)
    snap = rec.snapshot(at_oom=True)
    rec.stop()
    stats = torch.cuda.memory_stats(0)
    d.update(device=torch.cuda.get_device_name(0), total=total, cap_asked=cap,
             peak_reserved=stats["reserved_bytes.all.peak"],
             retries=stats["num_alloc_retries"], ooms=stats["num_ooms"],
             at_oom=(snap.get("memlab") or {}).get("oom"))
    if record:
        _write_snapshot(snap, Path(f"{out}.pkl.gz"))
    d["allocs"] = alloc_digest(snap)
    return d


def job_lesson23(out: Path, record: bool, cpu: bool) -> dict:
    """Lesson 23's baseline through the lab's engine, as `memlab run 23 --snapshot` runs it."""
    import importlib.util

    from lab.course.curriculum import load_lesson
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    lesson = load_lesson(ROOT / "lessons" / "23-allocator-tuning")
    spec = importlib.util.spec_from_file_location("memlab_experiment", lesson.experiment_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scale = "small" if cpu else "seed"
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "snap.pkl")
        req = RunRequest.for_lesson(lesson, "baseline", "cpu" if cpu else "cuda", scale,
                                    profile_path=None if cpu else path, timing=False)
        r = measure_request(req, module.baseline)
        d = {"case": "lesson23", "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
             "record": record, "status": r.status, "message": r.error or ""}
        if cpu:
            return d
        import torch

        from lab.snapshots import load_plain

        with open(path, "rb") as f:
            snap = load_plain(f)
        d.update(torch=torch.__version__, device=torch.cuda.get_device_name(0),
                 total=torch.cuda.get_device_properties(0).total_memory,
                 cap_asked=int(lesson.params(scale)["gpu_memory"]),
                 peak_reserved=r.allocator.peak_reserved_bytes if r.allocator else None,
                 at_oom=(snap.get("memlab") or {}).get("oom"))
        if record:
            _write_snapshot(snap, Path(f"{out}.pkl.gz"))
        d["allocs"] = alloc_digest(snap)
        return d


def _status(run, d: dict | None = None) -> str:
    import torch

    try:
        run()
        return "ok"
    except torch.OutOfMemoryError as e:
        if d is not None:
            d["message"] = str(e).splitlines()[0]
        return "oom"


def _write_snapshot(snap: dict, path: Path) -> None:
    with gzip.open(path, "wb", compresslevel=9) as f:
        pickle.dump(snap, f, protocol=4)


def alloc_digest(snap: dict, device: int = 0) -> dict:
    """What a rerun is compared by: every request in order (size, reserved just after it, the
    highest reserved so far) and where the trace's first out-of-memory was (requests before it)."""
    entries = (snap.get("device_traces") or [[]])[device] or []
    reserved = peak = 0
    sizes, peaks, oom_at = [], [], None
    for e in entries:
        a = e.get("action")
        if a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
            peak = max(peak, reserved)
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif a == "alloc":
            sizes.append(e["size"])
            peaks.append(peak)
        elif a == "oom" and oom_at is None:
            oom_at = len(sizes)
    return {"sizes": sizes, "peak_reserved": peaks, "oom_at": oom_at, "entries": len(entries)}


def run_job(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("out")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    a = ap.parse_args(argv)
    out = Path(a.out)
    t0 = time.time()
    d = (job_lesson23(out, a.record, a.cpu) if a.case == "lesson23"
         else job_case(a.case, out, a.record, a.cpu))
    d["wall_s"] = round(time.time() - t0, 2)
    Path(f"{out}.json").write_text(json.dumps(d))  # (a name may hold a dot: "…threshold-0.6")


# ---- the parent: every job, then one tar --------------------------------------------------------
def jobs() -> list[tuple[str, str, bool]]:
    """(case, PYTORCH_CUDA_ALLOC_CONF, record?) for every job: each case recorded with the
    defaults, then rerun under each setting."""
    cases = [*CASES, "lesson23"]
    out = [(case, "", True) for case in cases]  # first: a deadline cuts reruns, not recordings
    out += [(case, conf, False) for conf in SETTINGS for case in cases if case not in RERUN_AS]
    return out


def job_name(case: str, conf: str) -> str:
    return case + ("__" + conf.replace(":", "-") if conf else "")


def record_all(out_dir: Path, cpu: bool) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="oom_cases_"))
    log = open(out_dir / "log.txt", "w")
    start = time.time()

    def one(job):
        case, conf, record = job
        name = job_name(case, conf)
        if not cpu and time.time() - start > DEADLINE_S:
            return f"{name}: skipped (past the {DEADLINE_S} s deadline)"
        if cpu:  # a dry run: in this process (the settings change nothing on the CPU)
            run_job([case, str(work / name), *["--record"] * record, "--cpu"])
            return f"{name}: {json.loads((work / f'{name}.json').read_text())['status']}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
               "MEMLAB_HOME": str(work / "home")}
        env.pop("PYTORCH_ALLOC_CONF", None)
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        cmd = [sys.executable, __file__, "--job", case, str(work / name)]
        cmd += ["--record"] * record + ["--cpu"] * cpu
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
            status = json.loads((work / f"{name}.json").read_text())["status"] \
                if (work / f"{name}.json").exists() else f"no result (rc {p.returncode})"
            return f"{name}: {status} " + " | ".join(tail)
        except subprocess.TimeoutExpired:
            return f"{name}: timed out after {JOB_TIMEOUT_S} s"

    with ThreadPoolExecutor(max_workers=1 if cpu else WORKERS) as pool:
        for line in pool.map(one, jobs()):
            print(line, file=log, flush=True)
            print(line, flush=True)
    tar = out_dir / "oom_cases.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        for f in sorted(work.iterdir()):
            if f.is_file():
                t.add(f, arcname=f.name)
    print(f"wrote {tar} ({tar.stat().st_size:,} B) in {time.time() - start:.0f} s", file=log)
    print(f"wrote {tar} ({tar.stat().st_size:,} B) in {time.time() - start:.0f} s")


# ---- here: the fixtures, and the replay against the reruns --------------------------------------
def compact(snap: dict, frames: int = 6) -> dict:
    """The snapshot cut to what the replay and the view read: stacks cut to their innermost
    `frames` (shared lists stay shared, so a pickle stores each once)."""
    cut: dict[int, list] = {}

    def short(fs):
        if not fs:
            return []
        got = cut.get(id(fs))
        if got is None:
            got = cut[id(fs)] = [{k: f[k] for k in ("filename", "line", "name") if k in f}
                                 for f in fs[:frames]]
        return got

    traces = [[{**{k: v for k, v in e.items() if k != "frames"}, "frames": short(e.get("frames"))}
               for e in t] for t in snap.get("device_traces") or []]
    segments = [{**{k: v for k, v in s.items() if k not in ("frames", "blocks")}, "frames": [],
                 "blocks": [{**{k: v for k, v in b.items() if k != "frames"},
                             "frames": short(b.get("frames"))} for b in s.get("blocks") or ()]}
                for s in snap.get("segments") or ()]
    out = {**snap, "segments": segments, "device_traces": traces}
    return out


def compare(case: str, snap: dict, reruns: list[dict]) -> list[dict]:
    """For each rerun: the replay's verdict and peak reserved against the GPU's. The request that
    failed is the k-th of the program (k requests came before it); a rerun served it when it made
    more than k requests before its own first out-of-memory."""
    from lab.snapshots.replay import replay_oom

    entries = snap["device_traces"][0]
    # each rerun's own setting (what the GPU ran), over the recorded ones, as `--try` replays it
    report = replay_oom(snap, 0, entries, settings=sorted({r["conf"] for r in reruns}))
    trials = {t.conf: t for t in report.trials}
    rows = []
    for r in reruns:
        a = r["allocs"]
        # a ring buffer drops the start: count the requests the original made before its
        # trace began (the rerun's trace is whole), from the rerun's own count
        k = _requests_before_oom(entries, a)
        made = len(a["sizes"]) if a["oom_at"] is None else a["oom_at"]
        served = k is not None and made > k
        same = bool(served and abs(a["sizes"][k] - report_request(entries)) < 512)
        t = trials.get(r["conf"])
        rows.append({"case": case, "conf": r["conf"], "gpu_served": served,
                     "gpu_peak_reserved": a["peak_reserved"][k] if served else None,
                     "same_request": same if served else None,
                     "replay_served": t.served if t else None,
                     "replay_peak_reserved": t.peak_reserved if t else None,
                     "gpu_retries_whole_run": r.get("retries")})
    return rows


def report_request(entries: list) -> int:
    return [e for e in entries if e.get("action") == "oom"][-1]["size"]


def _requests_before_oom(entries: list, rerun: dict) -> int | None:
    """How many requests the program made before the one that failed. A whole trace counts
    them; a ring buffer's lost the first ones: then the rerun's requests are matched from the
    end of the original's (the last requests before the failure, sizes in order)."""
    last = max(i for i, e in enumerate(entries) if e.get("action") == "oom")
    sizes = [e["size"] for e in entries[:last] if e.get("action") == "alloc"]
    theirs = rerun["sizes"]
    m = min(len(sizes), len(theirs))
    if theirs[:m] == sizes[:m]:
        return len(sizes)  # the whole program is in the trace
    n = len(sizes)
    for k in range(n, len(theirs) + 1):  # the first place the original's tail ends
        if theirs[k - n:k] == sizes:
            return k
    return None


def merge(tar_path: Path, write: bool = True) -> list[dict]:
    with tarfile.open(tar_path, "r:gz") as t:
        files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    metas = {n[:-5]: json.loads(b) for n, b in files.items() if n.endswith(".json")}
    rows, digest = [], {"recorded": {}, "reruns": []}
    if write:
        FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, meta in sorted(metas.items()):
        if not meta.get("record"):
            continue
        case = meta["case"]
        raw = files.get(f"{name}.pkl.gz")
        if raw is None:
            print(f"{case}: no snapshot ({meta.get('status')})")
            continue
        from lab.snapshots import load_plain

        snap = load_plain(gzip.decompress(raw))
        small = compact(snap)
        if write:
            target = LESSON_ASSET if case == "lesson23" else FIXTURES / f"{case}.pkl.gz"
            with gzip.open(target, "wb", compresslevel=9) as f:  # protocol 5 for one of them:
                pickle.dump(small, f, protocol=5 if case == "holes" else 4)  # the loader reads it
        source = RERUN_AS.get(case, case)
        reruns = [m for m in metas.values() if m["case"] == source and not m.get("record")]
        got = compare(case, small, reruns)
        rows += got
        digest["recorded"][case] = {k: meta.get(k) for k in (
            "status", "message", "device", "torch", "total", "cap_asked", "at_oom",
            "peak_reserved", "retries")}
        digest["reruns"] += got
    if write:
        (FIXTURES / "reruns.json").write_text(json.dumps(digest, indent=1) + "\n")
    _print(rows)
    return rows


def _print(rows: list[dict]) -> None:
    print(f"{'case':14} {'setting':34} {'GPU':>5} {'replay':>7} {'GPU peak':>15} "
          f"{'replay peak':>15} {'Δ':>7}")
    for r in rows:
        g, p = r["gpu_peak_reserved"], r["replay_peak_reserved"]
        delta = f"{(p - g) / g:+.1%}" if g and p else "—"
        print(f"{r['case']:14} {r['conf']:34} {str(r['gpu_served']):>5} "
              f"{str(r['replay_served']):>7} {g or 0:>15,} {p or 0:>15,} {delta:>7}"
              + ("" if r["same_request"] in (True, None) else "  (not the same request!)"))


def check() -> None:
    digest = json.loads((FIXTURES / "reruns.json").read_text())
    _print(digest["reruns"])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        return run_job(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="record every case here (a CUDA GPU; --cpu: a dry run)")
    ap.add_argument("--cpu", action="store_true", help="run every job's code tiny on the CPU")
    ap.add_argument("--merge", metavar="TAR", help="write the fixtures from a GPU run's tar.gz")
    ap.add_argument("--check", action="store_true", help="print the committed comparison")
    a = ap.parse_args()
    if a.out:
        record_all(Path(a.out), a.cpu)
    elif a.merge:
        merge(Path(a.merge))
    elif a.check:
        check()
    else:
        ap.error("give --out, --merge or --check")


if __name__ == "__main__":
    main()
