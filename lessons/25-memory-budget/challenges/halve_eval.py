"""Challenge: halve the peak of this evaluation loop with one line.

GPT-2 124M (random weights) scores 4 batches of 8 x 1,024 tokens and keeps each loss. Nothing
here trains. Add ONE line so that the peak is at most half of what it is now; the losses must
still be computed, for every batch. `memlab challenge check halve-eval` runs your copy in sim and
compares its tracked peak with this file's.
"""

import torch.nn.functional as F

from lab.workloads.phases import phase
from lab.workloads.tasks import LM


def challenge(run):
    task = LM(run.p.eval_layout, run.p.batch, run.p.seq)
    with run.phase("model", setup=True):
        model = task.build(run.device)
        model.eval()
    losses = []
    for i in range(run.p.eval_batches):
        with run.phase(phase("data", i), category="inputs", setup=True):
            x, y = task.get(i, run.device, split="eval")
        with run.phase(phase("eval", i)):
            logits = model(input_ids=x).logits  # (B, T, V)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            losses.append(loss)
    run.metric("batches_scored", len(losses))
