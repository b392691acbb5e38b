"""Lesson 06: the logits peak — cross-entropy over a 151,936-token vocabulary.

The Qwen2-1.5B layout in bf16, `steps` training steps on one batch (plain SGD: no optimizer
state, so every difference between the variants is the loss's). The first step also pays for
the cudaMallocs the loss needs; the later ones are what a step of this loss costs. The language-model head turns the hidden states
(B, T, C) into logits (B, T, V) with V = 151,936: with B·T = 4,096 tokens one (B, T, V) tensor is
1.2 GB in bf16 and 2.5 GB in fp32. The standard loss makes several of them:

    logits = lm_head(h)                 (B, T, V) bf16, kept by the output object
    logits.float()                      (B, T, V) fp32: transformers upcasts before the loss
    log_softmax(...)                    (B, T, V) fp32, saved for backward
    backward: d log_softmax, d logits   (B, T, V) fp32 each, then bf16

Variants:
  baseline          model(input_ids, labels=...).loss, as transformers computes it
  chunked           the hidden states in chunks of `chunk` tokens through the LM head and the
                    loss, each chunk under torch.utils.checkpoint: no (B, T, V) tensor ever exists
  chunked_no_remat  the same chunks without checkpoint: each chunk's log_softmax is still saved
  fused             liger-kernel's LigerFusedLinearCrossEntropyLoss (Triton; CUDA only, an
                    optional extra: pip install 'memlab[liger]')
"""

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from lab.workloads.data import lm_batch
from lab.workloads.models import build_model
from lab.workloads.registry import layout

IGNORE = -100  # the label transformers (and F.cross_entropy) skip: the last position has no next token


def model_layout(run):
    """The layout with the scale's sizes: the real Qwen2-1.5B at seed scale, a 2-layer, 64-wide
    one with a 16,384-token vocabulary at small scale (the logits stay the big thing, 256 times
    the width; Qwen2's own 151,936 made a CPU without bf16 instructions crawl)."""
    return replace(layout(run.p.layout), n_layer=run.p.layers, n_embd=run.p.hidden, d_ff=run.p.ff,
                   n_head=run.p.heads, n_kv_head=run.p.kv_heads, vocab_size=run.p.vocab)


def setup(run):
    lay = model_layout(run)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device, dtype=torch.bfloat16)  # bf16 weights
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)  # no state: the peak is the loss's
    with run.phase("data 0", category="inputs", setup=True):
        x, _ = lm_batch(lay, run.p.batch, run.p.seq, 0, run.device)  # (B, T) token ids
        labels = F.pad(x[:, 1:], (0, 1), value=IGNORE)  # (B, T): the next token, as transformers shifts
    return model, opt, x, labels


def segments(run) -> int | None:
    """Segments the caching allocator holds now (each one a cudaMalloc): the real one on CUDA,
    the allocator model in sim, None on the CPU."""
    if run.is_cuda:
        return torch.cuda.memory_stats(run.device).get("segment.all.current", 0)
    stats = run.allocator_stats()
    return stats.segments if stats is not None else None


class Steps:
    """`steps` training steps of one loss; counts the segments step 0 and the later steps make.

    The first step pays for every cudaMalloc the loss needs (the timed pass starts after
    torch.cuda.empty_cache()); later steps reuse the cache. Step times with the first step left
    out rank the losses; segments_first_step / segments_later_steps say how different their
    first steps were."""

    def __init__(self, run, model, opt):
        self.run, self.model, self.opt = run, model, opt
        self.start = segments(run)

    def __iter__(self):
        for i in range(self.run.p.steps):
            yield i
            if i == 0:
                self.after_first = segments(self.run)

    def finish_step(self, i, loss):
        with self.run.phase(f"step {i}"):
            self.opt.step()
        with self.run.phase(f"zero_grad {i}"):
            self.opt.zero_grad(set_to_none=True)
        if i == self.run.p.steps - 1:
            self.run.metric("loss", self.run.item(loss))  # the same in every variant (no values in sim)
            end = segments(self.run)
            if end is not None:
                self.run.metric("segments_first_step", self.after_first - self.start)
                self.run.metric("segments_later_steps", end - self.after_first)


def baseline(run):
    model, opt, x, labels = setup(run)
    steps = Steps(run, model, opt)
    for i in steps:
        with run.phase(f"forward {i}"):
            # transformers shifts `labels` itself and upcasts the logits to fp32 (ForCausalLMLoss)
            out = model(input_ids=x, labels=x)  # out.logits: (B, T, V) bf16, kept by `out`
        with run.phase(f"backward {i}"):
            out.loss.backward()
        steps.finish_step(i, out.loss)
        del out  # nothing of this step outlives it: each step's peak is the same


# ---- chunked: no (B, T, V) tensor ------------------------------------------------------------
def chunk_loss_sum(h, weight, y):
    """One chunk: (n, C) hidden states -> (n, V) logits -> summed cross-entropy (fp32)."""
    logits = F.linear(h, weight).float()  # (n, V): the only logits alive, n = chunk tokens
    return F.cross_entropy(logits, y, ignore_index=IGNORE, reduction="sum")


def chunked_cross_entropy(h, weight, labels, chunk: int, remat: bool = True):
    """Mean cross-entropy of the LM head's logits, `chunk` tokens at a time.

    With `remat`, each chunk runs under checkpoint: its forward keeps only its inputs (a view of
    h, the head's weight, the labels) and backward runs it again, one chunk at a time.
    """
    h, labels = h.flatten(0, 1), labels.flatten()  # (B*T, C), (B*T,)
    total = h.new_zeros((), dtype=torch.float32)
    for hc, yc in zip(h.split(chunk), labels.split(chunk)):
        if remat:
            total = total + checkpoint(chunk_loss_sum, hc, weight, yc, use_reentrant=False)
        else:
            total = total + chunk_loss_sum(hc, weight, yc)
    return total / (labels != IGNORE).sum()  # the mean over real targets, as F.cross_entropy


def run_chunked(run, remat: bool):
    model, opt, x, labels = setup(run)
    head = model.get_output_embeddings().weight  # (V, C); tied to the token embedding in Qwen2
    steps = Steps(run, model, opt)
    for i in steps:
        with run.phase(f"forward {i}"):
            h = model.base_model(input_ids=x).last_hidden_state  # (B, T, C): all but the LM head
            loss = chunked_cross_entropy(h, head, labels, run.p.chunk, remat=remat)
            del h  # the graph keeps what backward needs
        with run.phase(f"backward {i}"):
            loss.backward()
        steps.finish_step(i, loss)
        del loss


def chunked(run):
    run_chunked(run, remat=True)


def chunked_no_remat(run):
    run_chunked(run, remat=False)


# ---- fused linear + cross-entropy (a Triton kernel) --------------------------------------------
def fused(run):
    if not run.is_cuda:
        raise NotImplementedError("cuda only: liger-kernel's fused linear cross-entropy is a Triton kernel "
                           "for CUDA GPUs; see the H200 recording of this variant")
    try:
        from liger_kernel.transformers.fused_linear_cross_entropy import (
            LigerFusedLinearCrossEntropyLoss)
    except ImportError:
        raise RuntimeError("needs liger-kernel, an optional extra: pip install 'memlab[liger]'") from None
    model, opt, x, labels = setup(run)
    head = model.get_output_embeddings().weight
    loss_fn = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE)  # mean over real targets
    steps = Steps(run, model, opt)
    for i in steps:
        with run.phase(f"forward {i}"):
            h = model.base_model(input_ids=x).last_hidden_state  # (B, T, C)
            # computes the loss and, chunk by chunk, the gradients of h and of the head already
            loss = loss_fn(head, h.flatten(0, 1), labels.flatten())
            del h
        with run.phase(f"backward {i}"):
            loss.backward()
        steps.finish_step(i, loss)
        del loss
