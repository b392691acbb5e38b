"""SDPA's math backend as it runs on real CUDA tensors, for sim's fake ones.

`_scaled_dot_product_attention_math` (aten/src/ATen/native/transformers/attention.cpp) is a
CompositeImplicitAutograd function, so on FakeTensor the same C++ runs, but it branches on the
tensor type: `if (areAnyTensorSubclassLike({attn, mask})) attn = attn.add(mask); else
attn.add_(mask);`. FakeTensor is subclass-like, so sim made one more (B, H, L, S) score tensor
per attention call than a plain CUDA run does (seen in the H200's allocator trace of Qwen2.5-0.5B fp32,
where grouped-query attention takes the math backend). `math_attention` is a port of
the function in torch 2.11: the same aten ops in the same order, called at the autograd level,
so autograd records the graph and saves the tensors it saves on CUDA. The in-place add is safe
for autograd: its target is the scores matmul's output, which nothing saved (matmul's bmm saves
its inputs).

Which branch CUDA takes depends on the run: `areAnyTensorSubclassLike` is also true whenever a
TorchDispatchMode is on (c10::impl::dispatch_mode_enabled), so under memlab's tensor tracker (its
cuda mode, the lessons' H200 recordings) CUDA adds out of place too; a plain training loop (the
H200 ground truth, what `memlab fit` predicts) adds in place. SimPolicy's `tracked` says which.

`_safe_softmax` is CompositeExplicitAutograd: autograd saves only its result, and on CUDA its
kernel is softmax, `isneginf` (1 byte per score), `all` over the last dim, a 0-dim zero and
`where` written into the softmax's own output. FakeTensor runs it as one op through a Python
decomposition whose parts the tensor tracker never sees; `safe_softmax` is that C++ composition,
which SimPolicy reroutes the op to below autograd (the tracker dispatches and counts each part).
The H200 trace shows exactly these requests: 224 MiB softmax out, 56 MiB isneginf, 56 KiB all,
one 4-byte scalar, no output of `where`.
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten
LOW = (torch.float16, torch.bfloat16)


def convert_boolean_attn_mask(mask, dtype):
    """attention.cpp: where(mask, 0.0, scalar_tensor(-inf)) in the query's dtype, no logical_not
    (the H200 trace: two 4-byte scalars, then the float mask)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    neg_inf = aten.scalar_tensor(-math.inf, dtype=dtype, device=mask.device)
    return torch.where(mask, 0.0, neg_inf)  # aten::where.ScalarSelf


def _acc(t):
    # "Keep query, key, value in high precision": 16-bit inputs are upcast unless allowed
    if t.dtype in LOW and not torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed():
        return t.to(torch.float32)
    return t


def _repeat_kv(query, key, value, enable_gqa):
    """pre_process_group_query_attention_input: k/v repeated per query head (a clone each)."""
    hq, hk, hv = query.size(-3), key.size(-3), value.size(-3)
    if not enable_gqa or hq == hk == hv:
        return key, value
    return (torch.repeat_interleave(key, hq // hk, dim=-3),
            torch.repeat_interleave(value, hq // hv, dim=-3))


def math_attention(query_, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                   scale=None, enable_gqa=False, in_place=True):
    """Returns the attention output (the composite op drops the weights it also returns).
    `in_place=False`: the subclass branch, which CUDA also takes under a dispatch mode.
    Names follow the C++ locals; they are freed where C++ destroys them (the H200 trace frees
    the repeated key, the scaled query, then the causal mask, at the function's end)."""
    origin = query_.dtype
    query_acc, key_acc, value_acc = _acc(query_), _acc(key), _acc(value)
    negative = scale is not None and scale < 0
    base = abs(scale) if negative else scale
    factor = math.sqrt(base if base is not None else 1.0 / math.sqrt(query_acc.size(-1)))
    query = aten.mul.Scalar(query_acc, -factor if negative else factor)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
        # ones(L, S).tril(): the ones die with the expression, the bool mask after converting
        lower = aten.tril(aten.ones([query.size(-2), key_acc.size(-2)], dtype=torch.bool,
                                    device=query.device))
        attn_mask = convert_boolean_attn_mask(lower, query.dtype)
        del lower
    key_expanded, value_expanded = _repeat_kv(query, key_acc, value_acc, enable_gqa)
    attn = torch.matmul(query, aten.mul.Scalar(key_expanded.transpose(-2, -1), factor))
    if attn_mask is not None:
        if in_place:
            attn.add_(attn_mask)  # the real-tensor branch
        else:
            attn = attn.add(attn_mask)
    attn = aten._safe_softmax(attn, -1)
    if dropout_p > 0.0:
        attn = aten.dropout(attn, dropout_p, True)
    # make_tuple(matmul(attn, v).to(origin), attn.to(origin)): GCC evaluates the arguments right
    # to left, so a 16-bit run makes its (discarded) weights copy before the output
    weights = attn.to(origin)
    out = torch.matmul(attn, value_expanded).to(origin)
    # C++ destroys locals in reverse order of construction; the returned tuple (the weights)
    # outlives them
    del attn, key_expanded, value_expanded, query, attn_mask, value_acc, key_acc, query_acc
    return out


def safe_softmax(self, dim, dtype=None):
    """at::native::_safe_softmax as CUDA runs it, below autograd (SimPolicy reroutes to it)."""
    if dtype == torch.float32 and self.dtype == torch.float16:  # at::softmax's CUDA special case
        out = aten._softmax(self, dim, True)
    else:
        out = aten._softmax(self if dtype in (None, self.dtype) else self.to(dtype), dim, False)
    masked = aten.isneginf(self)
    masked_rows = aten.all.dim(masked, dim, True)
    zero = aten.scalar_tensor(0.0, dtype=out.dtype, device=out.device)
    aten.where.self_out(masked_rows, zero, out, out=out)  # "reuse storage for out"
    del zero, masked_rows, masked  # C++ locals die in reverse order
    return out
