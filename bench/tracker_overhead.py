"""Prints the tensor tracker's overhead and the simulation time of lesson 01 at seed scale.

    python bench/tracker_overhead.py [--device cpu|cuda] [--steps 5]

1. A small GPT-2-like training step (transformers GPT2LMHeadModel from a config, random
   weights, AdamW): median step time untracked vs under the TensorTracker; the ratio is the
   overhead a learner pays in cpu/cuda modes (the timing pass of a run is untracked anyway).
2. Lesson 01 (nn.Linear(10_000, 50_000), 3 passes) at seed scale under FakeTensorMode: the
   seconds of work `memlab run 01 --mode sim --scale seed` does after the process starts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402


def gpt2_step_times(device: str, steps: int, tracked: bool) -> list[float]:
    from transformers import GPT2Config, GPT2LMHeadModel

    from lab.measure.tracker import TensorTracker

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, n_positions=256, vocab_size=8192,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (4, 128), device=device)  # (B, T)
    times = []
    for i in range(steps + 1):  # the first step warms up (AdamW state, kernels) and is dropped
        tracker = TensorTracker() if tracked else None
        if tracker:
            tracker.__enter__()
        t0 = time.perf_counter()
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if tracker:
            tracker.__exit__(None, None, None)
            tracker.close()
        if i:
            times.append(dt)
    return times


def lesson01_sim_seconds() -> tuple[float, int]:
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import load_experiment, measure_request

    lesson = load_course().find("01")
    fn = load_experiment(str(lesson.experiment_path)).baseline
    t0 = time.perf_counter()
    res = measure_request(RunRequest.for_lesson(lesson, "baseline", "sim", "seed"), fn)
    return time.perf_counter() - t0, res.peak.bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    untracked = statistics.median(gpt2_step_times(args.device, args.steps, tracked=False))
    tracked = statistics.median(gpt2_step_times(args.device, args.steps, tracked=True))
    print(f"device                     {args.device} (torch {torch.__version__})")
    print(f"GPT-2-like step untracked  {untracked * 1000:9.1f} ms (median of {args.steps})")
    print(f"GPT-2-like step tracked    {tracked * 1000:9.1f} ms")
    print(f"tracker overhead           {tracked / untracked:9.2f} x")
    secs, peak = lesson01_sim_seconds()
    print(f"lesson 01 sim, seed scale  {secs:9.2f} s of work (peak {peak:,} B)")


if __name__ == "__main__":
    main()
