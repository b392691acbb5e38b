"""Lesson 17: the caching allocator — allocated vs reserved vs nvidia-smi, and fragmentation.

    torch.cuda.memory_allocated()   bytes in the allocator's live blocks: every request rounded
                                    up to 512 B, and blocks that back no tensor (cuBLAS workspace)
    torch.cuda.memory_reserved()    bytes PyTorch holds from the driver: live blocks + cached free
    nvidia-smi / NVML               the whole GPU: reserved + the CUDA context + other processes
    torch.cuda.empty_cache()        gives cached segments with no live block back to the driver

The fragmentation pattern, in the caching allocator's own rules (c10/cuda/CUDACachingAllocator.cpp):

1. One big tensor, then `del`: its segment stays cached (reserved, not allocated).
2. `blocks` tensors of `block_bytes`: each request takes the best-fitting cached block and splits
   it (a large block is split when more than 1 MiB would remain), so all of them are carved out of
   that ONE segment; no new cudaMalloc.
3. Free every other one: half the bytes are free again, but as holes between live blocks of the
   same segment. The allocator can give a segment back to the driver only when no block of it is
   live, so these holes can be neither merged nor released.
4. Ask for `big_blocks` blocks' worth: larger than any hole, smaller than all the holes together.
   No cached block fits, so the allocator needs a new segment; under the cap
   (`gpu_memory`, set with torch.cuda.set_per_process_memory_fraction) reserved + request is too
   much. It then frees every cached segment that has no live block and retries: there is none
   here, so it raises OutOfMemoryError, with most of the "reserved but unallocated" memory sitting
   in the holes.

With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set by lesson.toml before torch is
imported) a segment is virtual address space mapped to physical pages (20 MiB in the large pool);
on that retry the allocator unmaps the free pages inside the holes and maps new ones at the end of
the segment, so the request fits.

The experiment calls the session's `run.empty_cache()` / `run.memory_counters()` rather than
torch.cuda.* so that sim takes the same path: there the allocator model
(lab.measure.sim.allocator.model) answers, with the same rules, and runs out of memory where the
H200 did. The CPU has no caching allocator: it sees the tensors only (one curve, the same in every
variant) and nothing runs out of memory, because the tensors alone fit under the cap.
"""

import os

import torch


def counters(run, when):
    """allocated / reserved (and NVML used on CUDA) right now, as metrics `<name>_<when>`:
    the real allocator on CUDA, the allocator model in sim, nothing on the CPU."""
    c = run.memory_counters()
    for k, v in (c or {}).items():
        run.metric(f"{k}_{when}", v)
    return c


def alloc_retries(run):
    """How often the allocator freed its cache and retried a cudaMalloc (None on the CPU)."""
    if run.is_cuda:
        return torch.cuda.memory_stats(run.device)["num_alloc_retries"]
    stats = run.allocator_stats()
    return stats.num_alloc_retries if stats is not None else None


def release_cache(run, phase):
    """empty_cache(), and how many reserved bytes it gave back to the driver."""
    with run.phase(phase):
        before = run.memory_counters()
        if before is None or not run.empty_cache():
            run.note("empty_cache() is CUDA-only: the CPU has no cache to empty.")
            return
        after = run.memory_counters()
        run.metric(f"released_{phase.replace(' ', '_')}", before["reserved"] - after["reserved"])


def fragment(run, empty_cache_before_carving=False, empty_cache_before_request=False):
    n, size = run.p.blocks, run.p.block_bytes
    u8 = dict(dtype=torch.uint8, device=run.device)  # bytes, so sizes read as they are
    with run.phase("one byte"):
        one = torch.empty(1, **u8)  # memory_allocated grows by a 512-byte block, not 1 byte
    c = counters(run, "one_byte")
    with run.phase("one big tensor"):
        big = torch.empty(n * size, **u8)  # one segment of n * size bytes (cudaMalloc)
    c = counters(run, "big")
    if c and "nvml_used" in c:
        # NVML's used memory minus PyTorch's reserved: the CUDA context, libraries, the driver
        run.metric("nvml_minus_reserved", c["nvml_used"] - c["reserved"])
    if run.is_cuda:
        segs = torch.cuda.memory_snapshot()
        run.metric("expandable", any(s.get("is_expandable") for s in segs))
    with run.phase("free it"):
        del big  # allocated drops; the segment stays cached (reserved)
    counters(run, "free_big")
    if empty_cache_before_carving:
        release_cache(run, "empty_cache")  # the whole segment is free: it goes back to the driver
    with run.phase("carve blocks"):
        # each request splits the cached segment (or, after empty_cache, gets its own segment)
        blocks = [torch.empty(size, **u8) for _ in range(n)]
    counters(run, "carve")
    with run.phase("free every other block"):
        del blocks[::2]  # holes between live blocks: free, but not a whole free segment
    counters(run, "holes")
    if empty_cache_before_request:
        release_cache(run, "empty_cache")  # no segment is entirely free: nothing to give back
    retries = alloc_retries(run)
    with run.phase("ask for a larger block"):
        want = torch.empty(run.p.big_blocks * size, **u8)  # larger than any hole
    counters(run, "request")
    if retries is not None:
        # 1: no cached block fitted, the first try to get a new segment failed under the cap, so
        # the allocator freed cached memory and tried again (and this time it fitted)
        run.metric("alloc_retries", alloc_retries(run) - retries)
    with run.phase("free all"):
        del blocks, want, one
    counters(run, "free_all")
    release_cache(run, "empty_cache at the end")  # every segment is free now: all of it goes back
    counters(run, "end")


def baseline(run):
    fragment(run)


def empty_cache(run):
    fragment(run, empty_cache_before_request=True)


def expandable_segments(run):
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if "expandable_segments:True" in conf and run.cuda_kernels:
        run.note(f"PYTORCH_CUDA_ALLOC_CONF={conf} was set before torch was imported")
    elif run.cuda_kernels:  # a process without the variant's env: switch it on now
        ok = run.set_allocator_settings("expandable_segments:True")
        run.note("expandable_segments:True set at run time" if ok else
                 "expandable_segments:True could not be set by this PyTorch")
    else:
        run.note("expandable_segments is a CUDA allocator setting: the CPU runs the baseline's "
                 f"tensors (PYTORCH_CUDA_ALLOC_CONF={conf})")
    fragment(run)


def empty_cache_first(run):
    fragment(run, empty_cache_before_carving=True)
