"""Lesson 19: batch size, throughput and GPU utilisation; a data-bound loop and its fix.

Part 1, a batch sweep: the same training step at three batch sizes. Memory grows with the batch;
tokens per second grow too, until the GPU is busy all the time.

Part 2, a loop that waits for data: each sample takes `load_ms` milliseconds to "load" (a sleep
that stands for disk or network latency, said plainly: there is no real storage here). With
`num_workers=0` the GPU waits while the main process loads; with worker processes the next
batches are loaded while the GPU computes, and `pin_memory=True` + `non_blocking=True` make the
host-to-GPU copy asynchronous. `torch.profiler` then shows where the time goes.

Throughput is recorded from the untracked, timed pass (cpu and cuda modes); simulation has no
time. GPU busy % is NVML's "GPU utilisation" (cuda only), measured so that it means something:
the driver reports the share of its last sample period (1/6 s to 1 s, depending on the GPU) in
which a kernel was running. Read during or right after a few short steps, that period is mostly
the idle time before them: six 37 ms steps at batch 1 read 0 %. So the timed pass repeats the
same step for `busy_settle_s` seconds first, until the driver's period holds nothing but this
work, then samples NVML every 50 ms for `busy_window_s` seconds more and averages those samples.
(CUDA events would time the GPU from the first kernel to the last, idle gaps included, so they
cannot tell busy from waiting; NVML is also what nvidia-smi shows, the number people look at.)
"""

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from lab.workloads import TrainConfig
from lab.workloads.data import corpus_tokens
from lab.workloads.gpu import BusySampler
from lab.workloads.models import lm_loss
from lab.workloads.registry import layout
from lab.workloads.tasks import LM
from lab.workloads.train import get_batch, setup, train_step


class SlowTokens(Dataset):
    """Windows of token ids; each item takes `load_ms` to 'load' (a stand-in for I/O latency)."""

    def __init__(self, vocab, seq, n, load_ms):
        self.vocab, self.seq, self.n, self.load_ms = vocab, seq, n, load_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.load_ms / 1000)
        if self.vocab == 256:  # the tiny layout reads the corpus
            data = corpus_tokens()
            j = (i * 7919) % (len(data) - self.seq - 1)
            ids = data[j : j + self.seq + 1].astype(np.int64)
        else:
            ids = np.random.default_rng(i).integers(0, self.vocab, self.seq + 1, dtype=np.int64)
        ids = torch.from_numpy(ids)
        return ids[:-1], ids[1:]  # (T,), (T,)


def plain_step(model, opt, x, y):
    """The training step of `train_step` (fp32, one micro-batch), without the lab's phase marks."""
    lm_loss(model, x, y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def gpu_busy(run, step):
    """NVML's GPU utilisation over steady work: `step()` repeated for busy_settle_s, then sampled
    every 50 ms for busy_window_s more (cuda, untracked timed pass only; see the docstring)."""
    if not run.is_cuda or run.tracker is not None:
        return

    def repeat(seconds):
        end = time.perf_counter() + seconds
        while True:
            step()
            if time.perf_counter() >= end:
                break
        run.sync()

    repeat(run.p.busy_settle_s)  # the driver's sample period now holds only this work
    with BusySampler(run.device) as busy:
        repeat(run.p.busy_window_s)
    run.metric("gpu_busy_percent", busy.mean)
    run.metric("gpu_busy_samples", len(busy.samples))


def sweep(run, batch):
    task, cfg = LM(run.p.layout, batch, run.p.seq), TrainConfig()
    model, opt, scaler = setup(run, task, cfg)
    x, y = get_batch(run, task, 0)  # one batch, reused: no data loading in part 1
    t0 = time.perf_counter()
    for i in range(run.p.steps):
        train_step(run, model, opt, scaler, x, y, cfg, i)
    run.sync()
    report(run, batch, time.perf_counter() - t0)
    gpu_busy(run, lambda: plain_step(model, opt, x, y))


def report(run, batch, seconds):
    run.metric("tokens_per_step", batch * run.p.seq)
    if not run.simulated:
        run.metric("tokens_per_s", run.p.steps * batch * run.p.seq / seconds)


def loader_loop(run, workers, profile=False):
    batch = run.p.loader_batch
    task, cfg = LM(run.p.layout, batch, run.p.seq), TrainConfig()
    model, opt, scaler = setup(run, task, cfg)
    pin = run.is_cuda and workers > 0
    # enough windows for the measured steps and the busy-% window after them (made on demand)
    ds = SlowTokens(layout(run.p.layout).vocab_size, run.p.seq, batch * (run.p.steps + 10_000), run.p.load_ms)
    if run.simulated:  # a DataLoader draws a random seed with .item(): fake tensors have no values
        run.note("simulation: the batches are collated here, without a DataLoader or workers; "
                 "the GPU memory is the same, and time is not simulated")
        loader = [default_collate([ds[i * batch + j] for j in range(batch)])
                  for i in range(run.p.steps)]
    else:
        loader = DataLoader(ds, batch_size=batch, num_workers=workers, pin_memory=pin,
                            prefetch_factor=2 if workers else None)
    prof = None
    if profile and not run.simulated:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if run.is_cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
        prof.__enter__()
    t0 = time.perf_counter()
    it = iter(loader)
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs"):  # timed: waiting for data counts
            xb, yb = next(it)
            x = xb.to(run.device, non_blocking=pin)  # (B, T)
            y = yb.to(run.device, non_blocking=pin)
        train_step(run, model, opt, scaler, x, y, cfg, i)
    run.sync()
    seconds = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)
        run.note("torch.profiler, top operations by self CPU time:\n" + table)
    report(run, batch, seconds)
    if not profile:  # the profiled loop shows where the time goes; its busy % would include
        # the profiler's own overhead

        def loaded_step():  # the same loop: wait for the next batch, copy it, train on it
            xb, yb = next(it)
            plain_step(model, opt, xb.to(run.device, non_blocking=pin),
                       yb.to(run.device, non_blocking=pin))

        gpu_busy(run, loaded_step)


def baseline(run):
    sweep(run, run.p.batch_small)


def batch_medium(run):
    sweep(run, run.p.batch_medium)


def batch_large(run):
    sweep(run, run.p.batch_large)


def data_bound(run):
    loader_loop(run, workers=0)


def loader_workers(run):
    loader_loop(run, workers=run.p.workers)


def profiled(run):
    loader_loop(run, workers=0, profile=True)
