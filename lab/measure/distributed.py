"""torch.distributed in the lab: the ranks a run is one of, real or simulated.

cuda / cpu: the runner starts one worker per rank, the way torchrun does (lab/runner/group.py),
and the worker joins the group (nccl / gloo) before the experiment runs; every rank is measured
on its own. sim: the ranks are simulated in ONE process with PyTorch's fake process group
(`torch.testing._internal.distributed.fake_pg`): this process is rank 0 (or `sim_rank`) of
`world_size` ranks, collectives move no data, and every tensor a rank would hold is a fake tensor
of the right size, so a laptop answers "what does each of 1024 GPUs hold" in seconds.

The experiment code is the same in every mode (`with join(run): ...`); what sim changes (the
device mesh and the fake group built with the dispatch modes off, DDP's constructor check, FSDP2's
chunks made lazily, its CPUOffloadPolicy) is the sim backend's: `join` asks the run's backend for
its simulated ranks (lab.measure.sim.ranks), and only sim's has them. DDP's comm hook and its
rebuilt buckets are lab.measure.ddp's.
Above the rank counts the lab has measured on real GPUs (`VALIDATED_RANKS`), a simulated result
is rank 0 extrapolated: it leaves out NCCL's own buffers and the CUDA context (neither is in
PyTorch's allocator), and ranks that hold different shards (ZeRO-1) may differ from rank 0.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch.distributed as dist

from .torch_compat import disable_current_modes

# rank counts measured on real GPUs (two H200s, issue 13); issue 16 adds 4 and 8
VALIDATED_RANKS = (1, 2)


def extrapolation_note(world_size: int) -> str | None:
    """What a simulated result of `world_size` ranks cannot know, or None within what was measured."""
    if world_size in VALIDATED_RANKS:
        return None
    measured = ", ".join(str(n) for n in VALIDATED_RANKS if n > 1)
    return (f"{world_size} ranks is a rank-0 extrapolation (the lab has measured {measured} "
            "GPUs): it leaves out NCCL's buffers and the CUDA context, and ranks holding "
            "different shards may differ from rank 0")


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int
    simulated: bool  # sim: the fake process group in this one process
    device_type: str  # what the device mesh and the collectives run on: cuda | cpu


@contextmanager
def join(run) -> Iterator[Ranks]:
    """Be one rank of `run.p.world_size` (default 1) for the code inside.

    Real ranks: the group the runner started (its size must be world_size). One rank on cpu or
    cuda without a runner group: a group of one (gloo / nccl on a local store), so DDP and FSDP2
    run unchanged. sim: the fake process group, torn down on exit (in-process sim runs, such as
    `memlab fit`'s probes, follow one another).
    """
    n = int(getattr(run.p, "world_size", 1))
    if n < 1:
        raise ValueError(f"world_size must be 1 or more, not {n}")
    device_type = "cuda" if run.is_cuda else "cpu"
    simulated = run.backend.simulated_ranks(run, n, device_type)
    if simulated is not None:  # sim: many ranks in this one process (lab.measure.sim.ranks)
        with simulated as ranks:
            yield ranks
        return
    if dist.is_initialized():
        if dist.get_world_size() != n:
            raise ValueError(f"this run has {dist.get_world_size()} ranks but world_size is {n}: "
                             "start it with as many ranks (memlab run --gpus N)")
        yield Ranks(dist.get_rank(), n, False, device_type)
        return
    if n != 1:
        raise ValueError(f"world_size {n} needs {n} ranks, one process each: start the run "
                         f"with --gpus {n} (or simulate it: --mode sim)")
    with disable_current_modes():
        dist.init_process_group("nccl" if run.is_cuda else "gloo", store=dist.HashStore(),
                                rank=0, world_size=1)
    try:
        yield Ranks(0, 1, False, device_type)
    finally:
        with disable_current_modes():
            dist.destroy_process_group()


def device_mesh(ranks: Ranks):
    """The 1-D mesh FSDP2 shards over, built with the dispatch modes off (under sim's
    FakeTensorMode `init_device_mesh` fails: `rank_map.tolist()` has no data to read)."""
    from torch.distributed.device_mesh import init_device_mesh

    with disable_current_modes():
        return init_device_mesh(ranks.device_type, (ranks.world_size,))


# ---- FSDP2: the unsharded parameters, named ----------------------------------------------------
def fsdp_unsharded(run, model) -> int:
    """Label FSDP2's all-gather outputs — each block's unsharded parameters, allocated before
    its forward (and backward) and resized to nothing after — as "parameters"; returns the bytes
    of the largest block's. Call after the first forward (they are made lazily)."""
    largest = 0
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)  # FSDP2's private state: feature-detected
        group = getattr(state(), "_fsdp_param_group", None) if state is not None else None
        if group is None:
            continue
        size = 0
        for p in getattr(group, "fsdp_params", ()):
            for t in getattr(p, "all_gather_outputs", ()):
                run.mark(t, "parameters")
                size += t.numel() * t.element_size()
        largest = max(largest, size)
    return largest
