"""Challenge: fit this training step on a 16 GiB GPU, without changing the batch.

SmolLM2-360M (random weights), 8 sequences of 1,024 tokens, fp32, AdamW, 2 steps: as written it
needs more than 16 GiB. Change the code below - not the batch - until `memlab challenge check
fit-16gib` says it fits. The check runs it in sim on a GPU capped at 16 GiB (the allocator model
raises out-of-memory where PyTorch's allocator would under a 16 GiB memory fraction; a real
16 GiB card leaves PyTorch a little less, since its CUDA context takes some) and checks that the
batch is the one given:
run.p.batch x run.p.seq token ids in (x and y are one tensor: transformers shifts the
labels itself).

What you may use is the course: precision (lesson 08), checkpointing (09), accumulation (10),
optimizers (13, 14), anything you can read in lab/workloads/train.py.
"""

import torch

from lab.workloads.phases import phase
from lab.workloads.tasks import HFModel


def challenge(run):
    task = HFModel(run.p.model, run.p.batch, run.p.seq)
    with run.phase("model", setup=True):
        model = task.build(run.device, torch.float32)  # fp32 weights
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for i in range(run.p.steps):
        with run.phase(phase("data", i), category="inputs", setup=True):
            x, y = task.get(i, run.device)  # (B, T) token ids: keep the batch
        with run.phase(phase("forward", i)):
            loss = task.loss(model, x, y)
        with run.phase(phase("backward", i)):
            loss.backward()
        with run.phase(phase("step", i)):
            opt.step()
        with run.phase(phase("zero_grad", i)):
            opt.zero_grad(set_to_none=True)
