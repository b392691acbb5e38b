"""FSDP2's CPUOffloadPolicy in sim (lab/measure/sim/kernels/fsdp_offload.py): the shards, their
gradients and the optimizer state leave the device; pinned bytes are counted in the pinned-host
model; each all-gather copies its shards to the device first.

A stack of L bias-free Linear(D, D) layers, fully_shard per layer, on 2 simulated ranks: every
shard is D·D/2 fp32 values (D = 192: 73,728 B, a pinned block of 131,072 B).
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from lab.measure import distributed
from lab.measure.backends import backend_for
from lab.measure.measure import VariantSpec, measure
from lab.measure.trace import ALLOC

L, D, N = 4, 192, 2
SHARD = D * D * 4 // N  # bytes of one layer's shard on one rank
PINNED_BLOCK = 1 << (SHARD - 1).bit_length()  # the host allocator's power-of-two block


def _train(run, offload: str) -> None:
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    policy = {"none": OffloadPolicy(), "pageable": CPUOffloadPolicy(pin_memory=False),
              "pinned": CPUOffloadPolicy()}[offload]
    with distributed.join(run) as ranks:
        with run.phase("model", setup=True):
            model = nn.Sequential(*[nn.Linear(D, D, bias=False) for _ in range(L)]).to(run.device)
            mesh = distributed.device_mesh(ranks)
            for layer in model:
                fully_shard(layer, mesh=mesh, offload_policy=policy)
            fully_shard(model, mesh=mesh, offload_policy=policy)
            run.watch(model)
            opt = torch.optim.AdamW(model.parameters())
        x = torch.randn(8, D, device=run.device)
        for i in range(2):
            with run.phase(f"forward {i}"):
                loss = model(x).sum()
            with run.phase(f"backward {i}"):
                loss.backward()
            with run.phase(f"step {i}"):
                opt.step()
            with run.phase(f"zero_grad {i}"):
                opt.zero_grad(set_to_none=True)
        # the copies to the device before each all-gather: one shard-sized allocation per layer
        run.metric("shard_allocs_forward_1", sum(
            1 for e in run.tracker.trace.events
            if e.kind == ALLOC and e.phase == "forward 1" and e.nbytes == SHARD))
        run.metric("pinned_held", torch.cuda.host_memory_stats()["allocated_bytes.current"])
        del model, opt, loss


@functools.lru_cache(maxsize=None)
def run(offload: str):
    r = measure(functools.partial(_train, offload=offload),
                VariantSpec("fsdp-offload", offload, "small", {"world_size": N}, timing=False),
                backend_for("sim"))
    assert r.status == "ok", r.error
    return r


MODEL_STATES = ("parameters", "gradients", "optimizer_state")


def at_end(result, phase: str) -> dict[str, int]:
    """Bytes of each model state live when `phase` ended."""
    ph = result.phase(phase)
    tl = result.timeline
    idx = max(i for i, x in enumerate(tl.index) if x < ph.end_index)
    return {c: tl.by_category.get(c, [0] * len(tl.index))[idx] for c in MODEL_STATES}


def test_offloaded_shards_gradients_and_optimizer_state_leave_the_device():
    # Given the same model with and without CPUOffloadPolicy, when a step ends, then without it
    # each rank's device holds its shards, their gradients (zero_grad has not run) and AdamW's
    # two states; with it, none of them (AdamW's 4-byte step counters are counted either way)
    plain, pinned, pageable = run("none"), run("pinned"), run("pageable")
    assert at_end(plain, "step 1") == {"parameters": L * SHARD, "gradients": L * SHARD,
                                        "optimizer_state": 2 * L * SHARD + 4 * L}
    for offloaded in (pinned, pageable):
        assert at_end(offloaded, "step 1") == {"parameters": 0, "gradients": 0,
                                               "optimizer_state": 4 * L}
        # the peak (backward: all-gathered layers, gradients) drops by at least the model states
        assert offloaded.peak.bytes <= plain.peak.bytes - 3 * L * SHARD


def test_each_all_gather_copies_the_shards_to_the_device_first():
    # the all-gather input of a device-resident shard is the shard itself; an offloaded one is
    # copied from the host to the device first (one allocation per layer in each forward)
    assert run("none").metrics["shard_allocs_forward_1"] == 0
    assert run("pinned").metrics["shard_allocs_forward_1"] == L
    assert run("pageable").metrics["shard_allocs_forward_1"] == L


def test_pinned_host_memory_holds_the_shards_and_the_gradients():
    # pin_memory=True (PyTorch's default): each shard pinned at fully_shard, each gradient copied
    # to pinned memory in backward (a non-blocking copy to the host is pinned), in power-of-two
    # blocks that the host allocator caches: the second step reuses the first one's
    assert run("pinned").metrics["pinned_held"] == 2 * L * PINNED_BLOCK
    assert run("pageable").metrics["pinned_held"] == 0
    assert run("none").metrics["pinned_held"] == 0


@pytest.mark.parametrize("offload", ["none", "pinned"])
def test_nothing_stays_patched_after_the_run(offload):
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    before = (_fsdp_param.FSDPParam._init_sharded_param, _fsdp_param_group.foreach_reduce,
              _fsdp_param_group.FSDPParamGroup._validate_no_meta_params)
    run(offload)
    after = (_fsdp_param.FSDPParam._init_sharded_param, _fsdp_param_group.foreach_reduce,
             _fsdp_param_group.FSDPParamGroup._validate_no_meta_params)
    assert before == after
