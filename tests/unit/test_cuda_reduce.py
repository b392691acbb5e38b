"""CUDA reductions' staging buffer and semaphores (lab.measure.sim.kernels.reduce), sized as on the
H200 (torch 2.11, 132 SMs): the allocator trace of lesson 05 (Qwen2 bf16, B*T = 4096 rows) shows
each of these right after the op's output, freed before it returns."""

import torch

from lab.measure.sim.kernels.reduce import op_staging, staging_bytes

A = torch.ops.aten


def meta(shape, dtype):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_bias_gradient_sum_over_rows():
    # q_proj bias / RMSNorm weight gradient: (4096, 1536) bf16 summed over dim 0
    x = meta((4096, 1536), torch.bfloat16)
    out = meta((1, 1536), torch.bfloat16)
    assert op_staging(A.sum.dim_IntList, (x, [0], True), {}, out) == (50_331_648, 48)
    # k/v_proj bias: 256 outputs
    x = meta((4096, 256), torch.bfloat16)
    assert op_staging(A.sum.dim_IntList, (x, [0]), {}, meta((256,), torch.bfloat16)) == (
        8_388_608, 8)


def test_sum_over_leading_dims_coalesces():
    # (B, T, C) summed over B and T is the same iterator as (B*T, C) over dim 0
    x = meta((4, 1024, 1536), torch.bfloat16)
    out = meta((1536,), torch.bfloat16)
    assert op_staging(A.sum.dim_IntList, (x, [0, 1]), {}, out) == (50_331_648, 48)


def test_full_mean_splits_across_blocks():
    # the stand-in loss's mean() of (1, 4096, 1536) fp32: 528 blocks, one output
    x = meta((1, 4096, 1536), torch.float32)
    assert op_staging(A.mean.default, (x,), {}, meta((), torch.float32)) == (2112, 4)


def test_no_global_reduce():
    # RMSNorm's mean over the last dim: many outputs, each reduced inside one block
    x = meta((4096, 1536), torch.float32)
    assert op_staging(A.mean.dim, (x, [-1], True), {}, meta((4096, 1), torch.float32)) == (0, 0)
    # few inputs per output
    x = meta((8, 1536), torch.float32)
    assert op_staging(A.sum.dim_IntList, (x, [0]), {}, meta((1536,), torch.float32)) == (0, 0)
    # not a TensorIterator reduction
    y = meta((4096, 1536), torch.float32)
    assert op_staging(A.mm.default, (y, y.t()), {}, meta((4096, 4096), torch.float32)) == (0, 0)


def test_vector_norm_over_everything():
    x = meta((4096, 1536), torch.float32)
    assert op_staging(A.linalg_vector_norm.default, (x, 2), {}, meta((), torch.float32)) == (
        2112, 4)


def test_staging_bytes_fp32_output_vectorised():
    # (4096, 768) fp32 over dim 0: 4 outputs per thread, 6 blocks of outputs x 64 per output
    assert staging_bytes([4096, 768], [3072, 4], [0, 4], 4, 4) == (25_165_824, 24)


def test_sim_takes_and_gives_back_the_staging(monkeypatch):
    from lab.measure.sim.dispatch.policy import CudaPaths

    calls = []

    class Tracker:
        def extra_transients(self, items):
            calls.append(items)

    policy = CudaPaths()
    x = meta((4096, 1536), torch.bfloat16)
    out = meta((1, 1536), torch.bfloat16)
    policy.after(A.sum.dim_IntList, (x, [0], True), {}, out, Tracker())
    assert calls == [[(("reduce", "buffer"), 50_331_648), (("reduce", "semaphores"), 48)]]
    calls.clear()
    policy.after(A.mean.dim, (x, [-1], True), {}, meta((4096, 1), torch.bfloat16), Tracker())
    assert calls == []
