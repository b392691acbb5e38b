"""Lesson 05: the bytes a transformer layer saves for backward, per token, and the sequence length.

The model's blocks run once with autograd on (the LM head is left out: lesson 06 is about it),
then a stand-in loss over the hidden states runs backward. While the blocks run,
`torch.autograd.graph.saved_tensors_hooks` sees every tensor autograd saves for backward; we
count each *storage* once (q, k and v can be views of one buffer) and skip the parameters.

Two things the pack hook must not do:
  * keep the tensor alive itself: we store only the storage's id (an int) and its size;
  * return the tensor as it came: a saved *output* carries its grad_fn, which holds the packed
    value, which holds the tensor again — a reference cycle whenever backward never runs
    (evaluation), through autograd's C++ nodes, so even gc.collect() cannot free it.
    `t.detach()` is the same storage without the grad_fn, which is all backward needs.

Attention: SDPA picks its kernel (`torch.nn.attention.sdpa_kernel` forces one). The fused
kernels (flash, memory-efficient, cuDNN, the CPU flash kernel) save q, k, v, the output and a
log-sum-exp per head and token; the math backend saves the (B, heads, T, T) probabilities —
in fp32, since it upcasts bf16 inputs — which grow with T².
"""

from contextlib import nullcontext
from dataclasses import replace

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from lab.measure.torch_compat import storage_key
from lab.workloads.data import lm_batch
from lab.workloads.models import blocks as transformer_blocks
from lab.workloads.models import build_model
from lab.workloads.registry import layout


class SavedPerLayer:
    """Bytes saved for backward, per transformer block, counted by storage."""

    def __init__(self, model):
        # ids, not tensors: nothing here keeps memory alive
        self.params = {storage_key(p.untyped_storage()) for p in model.parameters()}
        self.seen: set[int] = set()
        self.where = "before the layers"
        self.bytes: dict[str, int] = {}
        for i, block in enumerate(transformer_blocks(model)):
            block.register_forward_pre_hook(lambda m, a, i=i: setattr(self, "where", f"layer {i}"))
            block.register_forward_hook(lambda m, a, o: setattr(self, "where", "after the layers"))

    def pack(self, t: torch.Tensor):
        s = t.untyped_storage()
        key = storage_key(s)
        if key not in self.params and key not in self.seen:
            self.seen.add(key)  # first saved here: the block that made it keep it
            self.bytes[self.where] = self.bytes.get(self.where, 0) + s.nbytes()
        return t.detach()  # same storage, no grad_fn: no reference cycle

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)

    def layer(self, i: int) -> int:
        return self.bytes.get(f"layer {i}", 0)


def model_layout(run, family: str):
    """The layout at this scale's sizes (seed: the real Qwen2-1.5B / GPT-2 124M dimensions)."""
    p = run.p
    if family == "qwen2":
        return replace(layout(p.layout), n_layer=p.layers, n_embd=p.hidden, d_ff=p.ff,
                       n_head=p.heads, n_kv_head=p.kv_heads, vocab_size=p.vocab)
    return replace(layout(p.gpt2_layout), n_layer=p.gpt2_layers, n_embd=p.gpt2_hidden,
                   d_ff=p.gpt2_ff, n_head=p.gpt2_heads, vocab_size=p.gpt2_vocab)


def measure(run, seq: int, family: str = "qwen2", backend=None):
    lay = model_layout(run, family)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device, dtype=torch.bfloat16)
    with run.phase("data 0", category="inputs", setup=True):
        x, _ = lm_batch(lay, run.p.batch, seq, 0, run.device)  # (B, T) token ids
    saved = SavedPerLayer(model)
    attention = sdpa_kernel(backend) if backend is not None else nullcontext()  # None: SDPA picks
    with run.phase("forward 0"), attention, saved:
        h = model.base_model(input_ids=x).last_hidden_state  # (B, T, C): the blocks, no LM head
    with run.phase("backward 0"):
        h.float().pow(2).mean().backward()  # a stand-in loss: backward uses every saved tensor
    tokens = run.p.batch * seq
    last = saved.layer(lay.n_layer - 1)  # layer 0 also keeps what all layers share (RoPE's cos/sin)
    run.metric("saved_bytes_per_layer", last)
    run.metric("saved_bytes_per_token_per_layer", last / tokens)
    run.metric("saved_bytes_all_layers", sum(saved.layer(i) for i in range(lay.n_layer)))


def baseline(run):
    measure(run, run.p.seq)


def short(run):
    measure(run, run.p.short_seq)


def long(run):
    measure(run, run.p.long_seq)


def longest(run):
    measure(run, run.p.longest_seq)


def math(run):
    measure(run, run.p.seq, backend=SDPBackend.MATH)


def math_longest(run):
    measure(run, run.p.longest_seq, backend=SDPBackend.MATH)


def gpt2(run):
    measure(run, run.p.seq, family="gpt2")
