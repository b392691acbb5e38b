"""Lesson 16: inference and the KV cache.

The Qwen2-1.5B layout in bf16 (random weights), under torch.inference_mode(): a prompt of
`prompt` tokens for each of `batch` sequences goes through the model once (prefill), then
`new_tokens` decode steps each feed one token and append its keys and values to the cache.

    KV cache bytes = 2 (K and V) · layers · kv_heads · head_dim · tokens · batch · bytes/element

A hand-written decode loop, not `generate()`: `generate()` reads values (`.item()`, stopping
criteria), which fake tensors (sim) do not have. Here the next token is the argmax of the last
logits, kept as a tensor and fed back, for a fixed number of steps: no Python decision depends
on a value, so the same code runs on a GPU, on the CPU and in simulation.

In the untracked timed pass the experiment also records how the step time splits: `prefill_s`
and `decode_s` (CUDA events on a GPU, so nothing synchronizes inside the step).

Variants:
  baseline   grouped-query attention (Qwen2: 2 KV heads for 12 query heads), transformers'
             DynamicCache: every step `torch.cat`s each layer's keys and values with the new
             token's, a new, one-token-longer tensor, and frees the old one
  static     the same model with a cache allocated once, at its final length, and filled in
             place (a hand-written preallocated buffer: no reallocation)
  mha        full multi-head attention (num_key_value_heads = num_attention_heads = 12): six
             times the keys and values per token, DynamicCache
"""

import time
from dataclasses import replace

import torch

from lab.workloads.data import lm_batch
from lab.workloads.models import build_model
from lab.workloads.registry import layout


def model_layout(run, kv_heads: int):
    p = run.p
    return replace(layout(p.layout), n_layer=p.layers, n_embd=p.hidden, d_ff=p.ff,
                   n_head=p.heads, n_kv_head=kv_heads, vocab_size=p.vocab)


def preallocated_cache(layers: int, max_len: int):
    """A transformers Cache whose layers allocate their keys and values once, at `max_len`
    tokens, and write each new token into place. Attention sees only the filled part (a view),
    exactly as with DynamicCache: only the memory behaviour differs."""
    from transformers.cache_utils import Cache, DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        def lazy_initialization(self, key_states, value_states):
            # everything set here (not in DynamicLayer's, whose signature varies by version)
            self.dtype, self.device = key_states.dtype, key_states.device
            self.is_initialized = True
            b, h, _, d = key_states.shape  # (B, kv_heads, T, head_dim)
            self.k_buf = torch.empty(b, h, max_len, d, dtype=key_states.dtype, device=key_states.device)
            self.v_buf = torch.empty(b, h, max_len, value_states.shape[-1],
                                     dtype=value_states.dtype, device=value_states.device)
            self.length = 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            start, end = self.length, self.length + key_states.shape[-2]
            self.k_buf[:, :, start:end].copy_(key_states)  # in place: no new tensor
            self.v_buf[:, :, start:end].copy_(value_states)
            self.length = end
            self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]  # views
            return self.keys, self.values

        def get_seq_length(self, *args, **kwargs) -> int:
            return self.length if self.is_initialized else 0

    return Cache(layers=[PreallocatedLayer() for _ in range(layers)])


def cache_tensors(cache) -> list[torch.Tensor]:
    """The tensors that hold the cache's memory (a preallocated layer's buffers, not its views)."""
    out = []
    for layer in cache.layers:
        out += [layer.k_buf, layer.v_buf] if hasattr(layer, "k_buf") else [layer.keys, layer.values]
    return out


class Churn:
    """Tensors allocated while a block runs: how many, and their bytes in all. The tracker's
    births (numel × itemsize) in every mode; on CUDA also the caching allocator's own counters
    (its requests, rounded to 512 B). The untracked timing pass has no tracker: nothing then."""

    def __init__(self, run):
        self.run = run

    def __enter__(self):
        tr = self.run.tracker
        self.start = len(tr.trace.events) if tr is not None else None
        if self.run.is_cuda:
            self.cuda_start = torch.cuda.memory_stats(self.run.device)
        return self

    def __exit__(self, *exc):
        tr, run = self.run.tracker, self.run
        if exc[0] is None and tr is not None:
            born = [e.nbytes for e in tr.trace.events[self.start:] if e.kind == "alloc"]
            run.metric("decode_allocations", len(born))
            run.metric("decode_allocated_bytes", sum(born))
            if run.is_cuda:
                now = torch.cuda.memory_stats(run.device)
                for key, name in (("allocation.all.allocated", "decode_allocator_allocations"),
                                  ("allocated_bytes.all.allocated", "decode_allocator_bytes")):
                    run.metric(name, now[key] - self.cuda_start[key])


class PartTimes:
    """The untracked timed pass's split of one generation into its prefill and its decode loop.
    The lab's clock synchronizes only where a step begins (lab.measure.timing), and so does this:
    CUDA events on a GPU, read once the step is done; the wall clock on the CPU, whose ops run
    as they are called. Nothing in the tracked pass, whose times carry the tracker's overhead."""

    def __init__(self, run):
        self.run, self.marks = run, []
        self.on = run.tracker is None

    def mark(self) -> None:
        if not self.on:
            return
        if self.run.is_cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def record(self, *names: str) -> None:
        if not self.on or len(self.marks) != len(names) + 1:
            return
        if self.run.is_cuda:
            self.marks[-1].synchronize()
            secs = [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:])]  # ms -> s
        else:
            secs = [b - a for a, b in zip(self.marks, self.marks[1:])]
        for name, t in zip(names, secs):
            self.run.metric(name, t)


def generate(run, kv_heads: int, preallocate: bool):
    """`steps` generations of the same prompt, each with a fresh cache (the tracked pass makes
    one; the timed pass more, and leaves the first out as warm-up)."""
    from transformers import DynamicCache

    p = run.p
    lay = model_layout(run, kv_heads)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device, dtype=torch.bfloat16).eval()
    with run.phase("data 0", category="inputs", setup=True):
        prompt = lm_batch(lay, p.batch, p.prompt, 0, run.device)[0]  # (B, P) token ids
        generated = torch.empty(p.batch, p.new_tokens, dtype=torch.long, device=run.device)  # (B, N)
    for step in range(p.steps):
        cache = (preallocated_cache(lay.n_layer, p.prompt + p.new_tokens) if preallocate
                 else DynamicCache())
        parts = PartTimes(run)
        with torch.inference_mode():
            with run.phase(f"prefill {step}"):
                parts.mark()
                # logits_to_keep=1: the LM head runs on the last position only, (B, 1, V)
                out = model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                token = out.logits[:, -1].argmax(-1, keepdim=True)  # (B, 1): stays a tensor
                del out
                parts.mark()
            with run.phase(f"decode {step}"), Churn(run):
                for i in range(p.new_tokens):
                    generated[:, i : i + 1] = token
                    out = model(input_ids=token, past_key_values=cache, use_cache=True,
                                logits_to_keep=1)
                    token = out.logits[:, -1].argmax(-1, keepdim=True)
                    del out
                del token  # what is left alive is the model, the inputs and the cache
                parts.mark()
        parts.record("prefill_s", "decode_s")  # the last generation's, in the timed pass
        kv = sum(t.untyped_storage().nbytes() for t in cache_tensors(cache))
        run.metric("kv_cache_bytes", kv)
        run.metric("kv_bytes_per_token", kv / (p.batch * (p.prompt + p.new_tokens)))
        run.metric("cache_tokens", cache.get_seq_length())
        del cache  # the next generation starts from nothing, as a new request would


def baseline(run):
    generate(run, run.p.kv_heads, preallocate=False)


def static(run):
    generate(run, run.p.kv_heads, preallocate=True)


def mha(run):
    generate(run, run.p.heads, preallocate=False)
