"""Sim takes CUDA's paths: autocast lists and weight cache, SDPA backend, cuBLAS workspaces."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from lab.measure.sim.allocator.replay import Replay
from lab.measure.sim.dispatch.fake_mode import fake_mode
from lab.measure.sim.gpus import H200
from lab.measure.sim.dispatch.policy import CudaPaths

CUBLAS_WORKSPACE, CUBLASLT_WORKSPACE = H200.cublas_workspace_bytes, H200.cublaslt_workspace_bytes
from lab.measure.trace import ALLOC, FREE
from lab.measure.tracker import TensorTracker


class Ops(TorchDispatchMode):
    """Records (op name, output dtypes/shapes)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        self.seen.append((func.__name__, [(t.dtype, tuple(t.shape)) for t in outs
                                          if isinstance(t, torch.Tensor)]))
        return out

    def names(self):
        return [n for n, _ in self.seen]


def sim(capacity=None):
    policy = CudaPaths()
    tracker = TensorTracker(policy=policy, observers=[Replay(cap=capacity)])
    return policy, tracker


def test_autocast_weight_copy_lives_until_the_region_exits_also_under_no_grad():
    policy, tr = sim()
    with fake_mode(), policy:
        lin = torch.nn.Linear(256, 512)  # made outside the tracker: not counted
        x = torch.randn(8, 256)
        with tr, torch.no_grad():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                lin(x)
                lin(x)  # the cached copy is reused: one bf16 weight copy, not two
                n_during = len(tr.trace.events)
            n_after = len(tr.trace.events)
    born = {e.sid: e for e in tr.trace.events if e.kind == ALLOC}
    weight_copies = [e for e in born.values() if e.nbytes == 256 * 512 * 2]
    assert len(weight_copies) == 1
    freed_at = [i for i, e in enumerate(tr.trace.events)
                if e.kind == FREE and e.sid == weight_copies[0].sid]
    assert freed_at and n_during <= freed_at[0] < n_after  # freed when the region exits


def test_gelu_new_pow_layer_norm_and_softmax_run_in_fp32_under_bf16_autocast():
    ops = Ops()
    with fake_mode(), CudaPaths():
        x = torch.randn(4, 64, dtype=torch.bfloat16)
        with ops, torch.autocast("cpu", dtype=torch.bfloat16):
            p = torch.pow(x, 3.0)  # GPT-2's gelu_new: 0.044715 * torch.pow(x, 3.0)
            ln = F.layer_norm(x, (64,))
            sm = torch.softmax(x, -1)
            mm = x.float() @ x.float().t()
    assert p.dtype == ln.dtype == sm.dtype == torch.float32
    assert mm.dtype == torch.bfloat16
    # and after sim, CPU autocast is itself again: pow stays in the input's dtype
    with fake_mode():
        x = torch.randn(4, 64, dtype=torch.bfloat16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.pow(x, 3.0).dtype == torch.bfloat16


def test_cross_entropy_under_autocast_is_fp32_like_cuda():
    with fake_mode(), CudaPaths():
        logits = torch.randn(16, 100)
        w = torch.randn(100, 100, requires_grad=True)
        y = torch.randint(0, 100, (16,))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = logits @ w  # bf16
            ops = Ops()
            with ops:
                F.cross_entropy(z, y)
    # cross_entropy -> log_softmax(z, dtype=z.dtype) stays bf16; nll_loss is on CUDA's fp32
    # list: its input is copied to fp32 (and saved for backward, as the H200 shows)
    names = ops.names()
    i = names.index("_log_softmax.default")
    assert ops.seen[i][1][0] == (torch.bfloat16, (16, 100))
    assert (torch.float32, (16, 100)) in [o[0] for n, o in ops.seen[i:] if n == "_to_copy.default"]
    assert any(n.startswith("nll_loss_forward") for n in names[i:])


def _sdpa_ops(dtype, kv_heads=4, inference=False):
    ops = Ops()
    with fake_mode(), CudaPaths() as policy:
        q = torch.randn(2, 4, 100, 64, dtype=dtype, requires_grad=not inference)
        kv = torch.randn(2, kv_heads, 100, 64, dtype=dtype, requires_grad=not inference)
        tr = TensorTracker(policy=policy)
        ctx = torch.inference_mode() if inference else torch.enable_grad()
        with ops, tr, ctx:  # the tracker reroutes; ops (below it) sees the parts
            F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=kv_heads != 4)
    return ops


def test_sdpa_takes_the_backend_cuda_takes():
    fp32 = _sdpa_ops(torch.float32)
    eff = [o for n, o in fp32.seen if n == "_scaled_dot_product_efficient_attention.default"]
    # out + fp32 logsumexp padded to a multiple of 32 + philox seed/offset
    assert eff and eff[0][1] == (torch.float32, (2, 4, 128))
    # 16-bit: cuDNN attention, as torch 2.11 + cuDNN 9.19 chose on the H200 (probe sim-1), also
    # for grouped-query attention; lse (B, H, L, 1) in fp32
    bf16 = _sdpa_ops(torch.bfloat16)
    cud = [o for n, o in bf16.seen if n == "_scaled_dot_product_cudnn_attention.default"]
    assert cud and cud[0][1] == (torch.float32, (2, 4, 100, 1))
    assert "_scaled_dot_product_cudnn_attention.default" in _sdpa_ops(torch.bfloat16, 2).names()
    gqa = _sdpa_ops(torch.float32, kv_heads=2)  # mem-efficient has no grouped-query attention
    assert not any("efficient" in n or "flash" in n for n in gqa.names())
    # math, with CUDA's _safe_softmax parts (lab.measure.sim.kernels.sdpa_math)
    assert "bmm.default" in gqa.names() and "isneginf.default" in gqa.names()
    inf = _sdpa_ops(torch.float32, inference=True)
    assert "_scaled_dot_product_efficient_attention.default" in inf.names()
    assert not any("for_cpu" in n for n in fp32.names() + bf16.names() + inf.names())


def test_attention_backward_scratch_is_taken_and_given_back():
    """cuDNN attention backward takes an fp32 dQ accumulator + fp32 (B, H, L) stats from the
    caching allocator (measured on the H200: 25,559,552 B for (8, 12, 1024, 64))."""
    policy, tr = sim()
    with fake_mode(), policy:
        q = torch.randn(8, 12, 1024, 64, dtype=torch.bfloat16, requires_grad=True)
        with tr:
            F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    scratch = [(kind, n) for _, kind, key, n in tr.trace.extras if key[0] == "scratch"]
    assert ("alloc", 25_559_040) in scratch and ("free", 25_559_040) in scratch


def test_cublas_workspaces_per_thread_and_cublaslt_for_a_biased_addmm():
    policy, tr = sim()
    with fake_mode(), policy:
        lin = torch.nn.Linear(64, 32)
        x = torch.randn(8, 64)
        with tr:
            lin(x).sum().backward()  # addmm (cuBLASLt, main) then mm on autograd's thread
            lin(x).sum().backward()  # the workspaces exist now: nothing new
    extras = [(key, n) for _, kind, key, n in tr.trace.extras if kind == "alloc"]
    assert sorted(extras) == sorted([(("cublas", "main"), CUBLAS_WORKSPACE),
                                     (("cublaslt", "main"), CUBLASLT_WORKSPACE),
                                     (("cublas", "autograd"), CUBLAS_WORKSPACE)])
    r = tr.observers[0].finish()
    assert r.peak_allocated >= 2 * CUBLAS_WORKSPACE + CUBLASLT_WORKSPACE


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_transformers_causal_lm_passes_no_mask_to_sdpa_in_sim():
    from lab.workloads.models import build_model
    from lab.workloads.registry import Layout

    lay = Layout("t", "gpt2", 64, 1, 2, 32, 64)
    ops = Ops()
    with fake_mode(), CudaPaths() as policy:
        with TensorTracker(policy=policy):
            model = build_model(lay, "cpu")
            x = torch.randint(0, 64, (2, 16))
            with ops:
                model(input_ids=x)
    assert not any(s == (2, 1, 16, 16) for _, outs in ops.seen for _, s in outs)
    assert "_scaled_dot_product_efficient_attention.default" in ops.names()


def test_allocator_cap_raises_cuda_shaped_oom():
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure

    def fn(run):
        with run.phase("big"):
            torch.empty(3 * 2**30, dtype=torch.uint8)

    r = measure(fn,
                VariantSpec("t", "v", "seed", {}, timing=False),
                backend_for("sim", gpu_memory=2 * 2**30))
    assert r.status == "oom" and r.error.startswith("CUDA out of memory. Tried to allocate 3.00 GiB")
    assert "2.00 GiB allowed" in r.error
    assert r.allocator.predicted and r.allocator.num_ooms == 1 and r.peak.bytes == 0


def test_allocator_api_reaches_the_model_in_sim():
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure

    seen = {}

    def fn(run):
        with run.phase("alloc"):
            blocks = [torch.empty(2**30, dtype=torch.uint8) for _ in range(4)]
        del blocks[::2]
        seen["before"] = run.memory_counters()
        assert run.empty_cache()
        seen["after"] = run.memory_counters()
        assert run.set_allocator_settings("expandable_segments:True")
        with run.phase("more"):
            torch.empty(2**30, dtype=torch.uint8)

    r = measure(fn, VariantSpec("t", "v", "seed", {}, timing=False), backend_for("sim"))
    assert r.status == "ok"
    assert seen["before"] == {"allocated": 2 * 2**30, "reserved": 4 * 2**30}
    assert seen["after"] == {"allocated": 2 * 2**30, "reserved": 2 * 2**30}
    assert r.allocator.end_reserved_bytes == 2 * 2**30 + 52 * 20 * 2**20  # 20 MiB pages now
