"""Lesson 03: a language model's training cycle, step by step.

Seed scale: the Qwen2-1.5B layout (1.54 B parameters, fp32: 6.2 GB) on batches of 16 × 256
tokens, three steps of AdamW. Small scale: a 2-layer byte-level GPT-2 on the bundled corpus.
The loop is written out here (the same one `lab.workloads.train` runs for other lessons).

Besides the timeline, the experiment counts the bytes autograd saves for backward with
`torch.autograd.graph.saved_tensors_hooks`, and compares the measured peak with the estimate
    parameters + optimizer state + max(gradients + optimizer intermediates, activations)
"""

import torch

from lab.workloads import TrainConfig
from lab.workloads.models import lm_loss
from lab.workloads.tasks import LM
from lab.workloads.train import get_batch, setup


class SavedBytes:
    """Counts the storages autograd saves for backward (parameters excluded), without keeping them."""

    def __init__(self, model):
        self.params = {p.untyped_storage()._cdata for p in model.parameters()}
        self.seen: dict[int, int] = {}

    def pack(self, t):
        s = t.untyped_storage()
        if s._cdata not in self.params and t.device.type != "meta":
            self.seen[s._cdata] = s.nbytes()
        return t  # nothing changes: we only look

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


def cycle(run, batch):
    task = LM(run.p.layout, batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(optimizer="adamw", impl="foreach"))
    saved = SavedBytes(model)
    P = sum(p.numel() * p.element_size() for p in model.parameters())  # parameter bytes
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
    A = saved.total
    run.metric("parameter_bytes", P)
    run.metric("saved_activation_bytes", A)  # the last step's
    # parameters + optimizer state + max(gradients + optimizer intermediates, activations)
    run.metric("estimate_bytes", P + 2 * P + max(P + P, A))
    run.metric("loss_first", first)
    run.metric("loss_last", last)


def baseline(run):
    cycle(run, run.p.batch)


def small_batch(run):
    cycle(run, run.p.small_batch)
