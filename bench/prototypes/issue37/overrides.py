"""Prototype (issue 37 item 1): CUDA-semantics fake kernels for ops whose meta/CPU path refuses
what CUDA accepts. Loaded only when MEMLAB_PROTO_OVERRIDES=1."""
import os
if os.environ.get("MEMLAB_PROTO_OVERRIDES"):
    import torch
    from torch._subclasses.fake_impls import register_op_impl
    aten = torch.ops.aten

    @register_op_impl(aten.histc.default)
    def histc(fake_mode, func, x, bins=100, min=0, max=0):
        # CUDA's histc takes integer inputs (transformers' MoE counts tokens per expert with it);
        # the CPU kernel refuses them. Shape (bins,), the input's dtype, as CUDA returns.
        with fake_mode:
            return torch.empty((bins,), dtype=x.dtype, device="cpu")

    @register_op_impl(aten._grouped_mm.default)
    def grouped_mm(fake_mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        # the meta kernel still insists on bf16; CUDA's _grouped_mm (torch >= 2.9) also takes
        # fp32/fp16 through its fallback. Shape and strides from the meta kernel on bf16
        # stand-ins, the dtype the CUDA kernel returns (out_dtype, else the inputs').
        def meta(t, dtype=None):
            if t is None:
                return None
            return torch.empty_strided(t.shape, t.stride(), dtype=dtype or t.dtype, device="meta")
        with torch._subclasses.fake_tensor.unset_fake_temporarily():
            out = torch.ops.aten._grouped_mm.default(
                meta(mat_a, torch.bfloat16), meta(mat_b, torch.bfloat16), meta(offs),
                meta(bias, torch.bfloat16), torch.bfloat16 if out_dtype is None else out_dtype)
        with fake_mode:
            return torch.empty_strided(out.shape, out.stride(),
                                       dtype=out_dtype or mat_a.dtype, device="cpu")
