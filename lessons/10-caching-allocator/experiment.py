"""Lesson 10: the caching allocator — allocated vs reserved vs what nvidia-smi shows.

    torch.cuda.memory_allocated()   bytes in live tensors (what the lab's tracker also counts)
    torch.cuda.memory_reserved()    bytes PyTorch holds from the driver: live + cached free blocks
    nvidia-smi / NVML               the whole GPU: reserved + the CUDA context + other processes
    torch.cuda.empty_cache()        gives *unused cached* blocks back to the driver; it frees no
                                    tensor, and the next allocation pays cudaMalloc again

The pattern: many equal blocks, free every other one, then ask for one block twice as big. The
free memory is there in total, but in holes of the wrong size: fragmentation.
"""

import torch

from lab.workloads.gpu import allocator_counters, set_allocator_settings


def counters(run, when):
    c = allocator_counters(run.device)  # None off CUDA: the tracker's timeline is "allocated"
    if c:
        for k, v in c.items():
            run.metric(f"{k}_{when}", v)


def fragment(run, empty_cache_before_big=False):
    n, size = run.p.blocks, run.p.block_bytes // 4  # float32 elements per block
    with run.phase("allocate"):
        blocks = [torch.ones(size, device=run.device) for _ in range(n)]
    counters(run, "allocate")
    with run.phase("free every other block"):
        del blocks[::2]  # half the memory is free again, in n/2 separate holes
    counters(run, "free")
    if empty_cache_before_big:
        with run.phase("empty_cache"):
            if run.is_cuda:
                torch.cuda.empty_cache()  # the freed blocks go back to the driver
            else:
                run.note("empty_cache() is CUDA-only: off CUDA the tracker shows tensors only.")
        counters(run, "empty_cache")
    with run.phase("one block twice as big"):
        big = torch.ones(2 * size, device=run.device)  # fits in no single hole
    counters(run, "big")
    with run.phase("free all"):
        del blocks, big
    counters(run, "end")


def baseline(run):
    fragment(run)


def empty_cache(run):
    fragment(run, empty_cache_before_big=True)


def expandable_segments(run):
    if run.is_cuda:
        ok = set_allocator_settings("expandable_segments:True")
        run.note("expandable_segments:True " + ("set for this process" if ok else
                                                "could not be set by this PyTorch"))
    else:
        run.note("expandable_segments is a CUDA allocator setting: off CUDA this variant is the "
                 "baseline.")
    fragment(run)
