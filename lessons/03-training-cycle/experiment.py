"""Lesson 03: a language model's training cycle, step by step.

Seed scale: the Qwen2-1.5B layout (1.54 B parameters, fp32: 6.2 GB), three steps of AdamW.
Small scale: a 2-layer byte-level GPT-2, three steps (seconds on a laptop CPU).

Two loops:
  baseline / small_batch      the lab's training loop (cross-entropy on the bundled corpus or
                              random tokens, AdamW foreach), at batch 16 and 4 × 256 tokens;
  seed_loop / seed_loop_b2    the Hugging Face blog's loop exactly: random ids below 100,
                              loss = mean of the logits, torch.optim.AdamW with PyTorch's
                              defaults, at batch 16 and 2 × 256 tokens.

Besides the timeline, the experiment counts the bytes autograd saves for backward with
`torch.autograd.graph.saved_tensors_hooks`, and compares the measured peak with two estimates:
    the course's:  parameters + optimizer state + max(gradients + optimizer intermediates, activations)
    the blog's:    parameters + optimizer state + max(gradients, optimizer intermediates, activations)
                   with activations = A × batch × seq × 4 B, A = 4.6894e-4 × N + 1.8494e6 per token
"""

import torch

from lab.measure.torch_compat import storage_key
from lab.workloads import TrainConfig
from lab.workloads.models import build_model, lm_loss
from lab.workloads.registry import layout
from lab.workloads.tasks import LM
from lab.workloads.train import get_batch, setup

BLOG_SLOPE, BLOG_INTERCEPT = 4.6894e-4, 1.8494e6  # the blog's activations-per-token heuristic


class SavedBytes:
    """Counts the storages autograd saves for backward (parameters excluded), without keeping them.

    The pack hook returns `t.detach()`, never `t` itself. A saved tensor that is the output of
    the op saving it (sigmoid, softmax, ...) carries a grad_fn that owns the saved slot; if the
    slot held that same tensor, the two would form a reference cycle through C++ that
    `gc.collect()` cannot free when backward never runs (an evaluation pass, an exception).
    A detached tensor shares the storage and has no grad_fn, so nothing cycles.
    """

    def __init__(self, model):
        self.params = {storage_key(p.untyped_storage()) for p in model.parameters()}
        self.seen: dict[int, int] = {}

    def pack(self, t):
        s = t.untyped_storage()
        key = storage_key(s)
        if key not in self.params and t.device.type != "meta":
            self.seen[key] = s.nbytes()
        return t.detach()  # same storage, no grad_fn: no reference cycle

    def __enter__(self):
        self.seen.clear()
        self.ctx = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)
        self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self.ctx.__exit__(*exc)

    @property
    def total(self) -> int:
        return sum(self.seen.values())


def report(run, model, saved, tokens, first, last):
    """The metrics both loops record: saved activations and the two estimates."""
    N = sum(p.numel() for p in model.parameters())
    P = sum(p.numel() * p.element_size() for p in model.parameters())  # parameter bytes
    A = saved.total  # bytes autograd saved in the last step's forward pass
    blog_A = (BLOG_SLOPE * N + BLOG_INTERCEPT) * tokens * 4  # the blog's A × B × L × P
    run.metric("parameter_bytes", P)
    run.metric("saved_activation_bytes", A)
    run.metric("saved_bytes_per_token", A / tokens)
    # parameters + optimizer state + max(gradients + optimizer intermediates, activations)
    run.metric("estimate_bytes", P + 2 * P + max(P + P, A))
    run.metric("blog_activation_bytes", blog_A)
    run.metric("blog_activation_ratio", blog_A / A if A else None)  # heuristic / measured
    # parameters + optimizer state + max(gradients, optimizer intermediates, activations)
    run.metric("blog_estimate_bytes", P + 2 * P + max(P, P, blog_A))
    run.metric("loss_first", first)
    run.metric("loss_last", last)


def cycle(run, batch):
    """The lab's loop: cross-entropy, AdamW foreach (lab.workloads), phases per step."""
    task = LM(run.p.layout, batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(optimizer="adamw", impl="foreach"))
    saved = SavedBytes(model)
    first = last = None
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)  # (B, T) token ids and next-token targets
        with run.phase(f"forward {i}"), saved:
            loss = lm_loss(model, x, y)  # activations are saved for backward as we go
        with run.phase(f"backward {i}"):
            loss.backward()  # activations are freed as gradients (size P) are made
        with run.phase(f"step {i}"):
            opt.step()  # AdamW: 2P of state (made at step 0) + a P-sized temporary (foreach sqrt)
        with run.phase(f"zero_grad {i}"):
            opt.zero_grad(set_to_none=True)
        first = run.item(loss) if first is None else first
        last = run.item(loss)
    report(run, model, saved, batch * run.p.seq, first, last)


def seed_loop(run, batch):
    """The blog's loop, line for line (its model is Qwen2.5-1.5B from the hub; here the same
    layout with random weights, built on the device)."""
    with run.phase("model", setup=True):
        model = build_model(layout(run.p.layout), run.device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # lr=1e-3 is the default too
    saved = SavedBytes(model)
    first = last = None
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            inputs = torch.randint(0, 100, (batch, run.p.seq), device=run.device)  # Dummy input
        with run.phase(f"forward {i}"), saved:
            loss = torch.mean(model(inputs).logits)  # Dummy loss
        with run.phase(f"backward {i}"):
            loss.backward()
        with run.phase(f"step {i}"):
            optimizer.step()  # PyTorch's default: foreach on CUDA, a per-parameter loop on a CPU
        with run.phase(f"zero_grad {i}"):
            optimizer.zero_grad()  # set_to_none=True is the default
        first = run.item(loss) if first is None else first
        last = run.item(loss)
    report(run, model, saved, batch * run.p.seq, first, last)


def baseline(run):
    cycle(run, run.p.batch)


def small_batch(run):
    cycle(run, run.p.small_batch)


def seed_loop_b16(run):
    seed_loop(run, run.p.batch)


def seed_loop_b2(run):
    seed_loop(run, run.p.seed_small_batch)
