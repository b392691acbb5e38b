"""Lesson 04: record the caching allocator's history, dump it as a snapshot, and read it.

On a CUDA GPU this is what you would add to your own training script:

    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    ...  # the code you want to see
    torch.cuda.memory._dump_snapshot("profile.pkl")       # pickle of torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)  # stop (and drop the entries)

then open profile.pkl at pytorch.org/memory_viz or with `memlab view profile.pkl`. The code
recorded is lesson 03's training loop (the Qwen2-1.5B layout, AdamW), so its phases are known.

In cpu and sim modes there is no caching allocator to ask. The lab's tensor tracker wrote down
every storage instead, and `trace_to_snapshot` turns that into the same file format (one block
per storage, no rounding, no allocator cache), so every mode has a snapshot to open.

The lab records the allocator history itself in every other lesson; here the experiment does it
(lesson.toml: `memory_history = "experiment"`) and hands its snapshot back with
`run.keep_snapshot`, so `memlab run 04 --snapshot FILE` saves what the experiment recorded.
"""

import os
import pickle
import tempfile
import time

import torch

from lab.workloads import TrainConfig
from lab.workloads.models import lm_loss
from lab.workloads.tasks import LM
from lab.workloads.train import get_batch, setup
from lab.measure.snapshot import trace_to_snapshot


def training_loop(run):
    """Lesson 03's loop: forward, backward, AdamW step, zero_grad, `steps` times. Returns the
    model and the optimizer, so that a snapshot taken next still finds their memory allocated."""
    task = LM(run.p.layout, run.p.batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(optimizer="adamw"))  # phase "model": weights (+ AdamW, state made lazily)
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)  # phase "data i": (B, T) token ids
        with run.phase(f"forward {i}"):
            loss = lm_loss(model, x, y)  # activations pile up, layer after layer
        with run.phase(f"backward {i}"):
            loss.backward()  # activations freed, gradients made
        with run.phase(f"step {i}"):
            opt.step()  # step 0 creates AdamW's two moments; a foreach temporary each step
        with run.phase(f"zero_grad {i}"):
            opt.zero_grad(set_to_none=True)  # gradients freed
    return model, opt


def record(run, max_entries: int, stacks: str):
    """Record the loop's allocator history, dump it, measure what that cost."""
    if run.is_cuda:
        torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks=stacks)
    elif stacks != "python":
        run.note(f'stacks="{stacks}" only changes CUDA recordings: the tracker\'s snapshot keeps one '
                 "Python frame per tensor in every mode (read the H200 recording for the cost)")
    # dumped while the model and AdamW's state are still alive, as in a training script that
    # dumps at the end of its loop: the snapshot's segments then hold them
    held = training_loop(run)
    snap = None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "profile.pkl")
        t0 = time.perf_counter()
        if run.is_cuda:
            torch.cuda.memory._dump_snapshot(path)  # symbolizes the stacks, then pickles
            dump_s = time.perf_counter() - t0
            torch.cuda.memory._record_memory_history(enabled=None)  # stop, drop the entries
            if run.tracker is not None:  # the measured pass: read it back for the lab
                with open(path, "rb") as f:
                    snap = pickle.load(f)  # our own file, just written
        else:
            snap = lab_snapshot(run, max_entries)
            if snap is not None:
                with open(path, "wb") as f:
                    pickle.dump(snap, f, protocol=4)
            dump_s = time.perf_counter() - t0
        if os.path.exists(path):
            run.metric("snapshot_bytes", os.path.getsize(path))
            run.metric("dump_s", dump_s)
    del held  # the loop's memory goes only now, after the dump
    if snap is not None:
        read_snapshot(run, snap, max_entries)
        run.keep_snapshot(snap)  # the lab plots it and `--snapshot FILE` saves it
    if run.is_cuda and run.tracker is not None:
        # the allocator's own counters, as a table; its "Peak Usage" column counts from the
        # last reset_peak_memory_stats(), which the lab calls as every phase begins
        run.note(torch.cuda.memory_summary(abbreviated=True))


def lab_snapshot(run, max_entries: int):
    """cpu/sim: the tracker's storages as a snapshot; a ring of `max_entries` keeps the newest."""
    if run.tracker is None:  # the untracked timing pass has no trace
        return None
    snap = trace_to_snapshot(run.tracker.trace)
    trace = snap["device_traces"][0]
    snap["device_traces"][0] = trace[-max_entries:]  # what a full ring buffer keeps
    return snap


def read_snapshot(run, snap: dict, max_entries: int) -> None:
    """What a reader checks first: how many entries, and what the trace cannot explain.

    Two different things, matched by address: blocks live at the dump whose `alloc` is not in
    the trace (made before recording began, or the ring dropped the entry), and `free_completed`
    entries whose `alloc` the ring dropped (memory freed during the trace, made before it)."""
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    live = {b["address"]: b["size"] for seg in snap["segments"] for b in seg["blocks"]
            if b["state"] == "active_allocated"}
    open_allocs: dict[int, int] = {}  # address -> size of the trace's allocs not yet freed
    orphan_frees = 0
    for e in trace:
        if e["action"] == "alloc":
            open_allocs[e["addr"]] = e["size"]
        elif e["action"] == "free_completed" and open_allocs.pop(e["addr"], None) is None:
            orphan_frees += e["size"]
    run.metric("trace_entries", len(trace))
    run.metric("ring_full", 1 if len(trace) >= max_entries else 0)
    run.metric("live_bytes_at_dump", sum(live.values()))
    run.metric("untraced_live_bytes", sum(n for a, n in live.items() if a not in open_allocs))
    run.metric("orphan_free_bytes", orphan_frees)


def baseline(run):
    record(run, run.p.max_entries, "python")


def small_ring(run):
    record(run, run.p.small_max_entries, "python")


def all_stacks(run):
    record(run, run.p.max_entries, "all")


def no_history(run):
    held = training_loop(run)  # freed at the same point as in the recording variants
    del held
