"""Lesson 23: tuning the caching allocator — PYTORCH_CUDA_ALLOC_CONF, each setting on a case
where it matters.

Two allocation patterns, plain uint8 tensors (bytes read as they are), on a GPU capped with
torch.cuda.set_per_process_memory_fraction (`gpu_memory`):

  a big block cut by a small one (baseline, max_split_size, expandable_segments)
      big = torch.empty(big_bytes); del big      # its segment stays cached
      keep = torch.empty(small_bytes)            # best fit: cut from that cached segment
      again = torch.empty(big_bytes)             # no free block is large enough, and the
                                                 # segment can't go back: it holds `keep`
  a growing cache (growing, growing_gc, growing_roundup, growing_expandable)
      for t in 1..steps: new = torch.empty(t * row_bytes); del old   # torch.cat in a loop:
                                                 # every block freed is too small for the next

The rules that decide (c10/cuda/CUDACachingAllocator.cpp; the lab's model of them in
lab/measure/sim/allocator*.py, which sim runs):
  - segments: 2 MiB for requests up to 1 MiB, 20 MiB for requests under 10 MiB, else the request
    rounded up to 2 MiB; a large free block is split when more than 1 MiB would remain;
  - before out-of-memory the allocator frees every cached segment that holds no live block and
    retries once (`num_alloc_retries`); a segment with one live block cannot be freed;
  - max_split_size_mb:N  blocks of N MiB or more are never split and never given to a smaller
    request (so the cached big block waits for the big request);
  - expandable_segments:True  a segment is mapped pages that can be unmapped and mapped again;
  - garbage_collection_threshold:T  (needs a memory fraction) before a new segment, when reserved
    exceeds T x the allowed memory, free the cached segments that waited longest;
  - roundup_power2_divisions:D  round requests up to one of D steps between powers of two, so
    near sizes share blocks.

Each variant's settings are its PYTORCH_CUDA_ALLOC_CONF (lesson.toml `env`), read when CUDA
starts. Everything asks torch.cuda.* (memory_stats, memory_snapshot, mem_get_info): on CUDA the
real allocator answers, in sim the lab's model; the CPU has no caching allocator (a note says so).
"""

import torch

from lab.snapshots.segments import LEGEND, segment_view


def has_allocator(run) -> bool:
    """CUDA, or sim (where torch.cuda.* reaches the allocator model)."""
    return run.cuda_kernels


def stats(run) -> dict:
    return torch.cuda.memory_stats(run.device) if has_allocator(run) else {}


def look_at_segments(run, when: str) -> None:
    """The segment view (memory_snapshot) and the counters that name fragmentation."""
    if not has_allocator(run):
        return
    view = segment_view(torch.cuda.memory_snapshot())
    st = stats(run)
    free, _total = torch.cuda.mem_get_info(run.device)  # the whole GPU: the cap does not apply
    run.metric(f"segments_{when}", len(view.rows))
    run.metric(f"holes_{when}", st.get("inactive_split_bytes.all.current", 0))
    run.metric(f"largest_free_{when}", view.largest_free)
    run.metric(f"reserved_{when}", st.get("reserved_bytes.all.current", 0))
    run.metric(f"allocated_{when}", st.get("allocated_bytes.all.current", 0))
    run.metric(f"mem_get_info_free_{when}", free)
    # which settings the allocator runs with: the snapshot says whether segments are
    # expandable; memory_stats names max_split_size (-1: unlimited)
    run.metric("expandable", any(r.expandable for r in view.rows))
    split = st.get("max_split_size", -1)
    run.metric("max_split_size_mb", split // 2**20 if split > 0 else 0)
    run.note(f"segments {when} (torch.cuda.memory_snapshot(); {LEGEND}):\n"
             + view.text(width=32, limit=6))


# ---- a big block cut by a small one --------------------------------------------------------------
def cut_big_block(run):
    u8 = dict(dtype=torch.uint8, device=run.device)
    before = stats(run)
    with run.phase("big tensor"):
        big = torch.empty(run.p.big_bytes, **u8)  # one segment of big_bytes
    with run.phase("free it"):
        del big  # cached: reserved, not allocated
    with run.phase("small tensor kept"):
        keep = torch.empty(run.p.small_bytes, **u8)  # cut from the cached big segment?
    look_at_segments(run, "kept")
    try:
        with run.phase("big tensor again"):
            again = torch.empty(run.p.big_bytes, **u8)
    except torch.OutOfMemoryError:
        look_at_segments(run, "oom")  # a snapshot taken on out-of-memory: where the bytes are
        raise
    after = stats(run)
    if before or after:
        run.metric("alloc_retries", after["num_alloc_retries"] - before.get("num_alloc_retries", 0))
    with run.phase("free all"):
        del keep, again


# ---- a growing cache -------------------------------------------------------------------------------
def grow(run):
    u8 = dict(dtype=torch.uint8, device=run.device)
    before = stats(run)
    with run.phase("grow"):
        cache = torch.empty(run.p.row_bytes, **u8)
        for t in range(2, run.p.steps + 1):
            longer = torch.empty(t * run.p.row_bytes, **u8)  # what torch.cat([cache, row]) makes
            del cache  # the old one is freed: too small for the next step
            cache = longer
    look_at_segments(run, "end")
    after = stats(run)
    if after:
        # how often the allocator freed its whole cache to retry (a synchronising, slow path),
        # and how many segments it asked the driver for and gave back
        run.metric("alloc_retries", after["num_alloc_retries"] - before.get("num_alloc_retries", 0))
        run.metric("device_allocs", after["num_device_alloc"] - before.get("num_device_alloc", 0))
        run.metric("device_frees", after["num_device_free"] - before.get("num_device_free", 0))
        run.metric("peak_reserved", after["reserved_bytes.all.peak"])
    with run.phase("free all"):
        del cache


def _cpu_note(run) -> None:
    if not has_allocator(run):
        run.note("PYTORCH_CUDA_ALLOC_CONF sets the CUDA caching allocator: the CPU has none, so "
                 "this runs the same tensors in every variant.")


def baseline(run):
    _cpu_note(run)
    cut_big_block(run)


def max_split_size(run):
    _cpu_note(run)
    cut_big_block(run)


def expandable_segments(run):
    _cpu_note(run)
    cut_big_block(run)


def growing(run):
    _cpu_note(run)
    grow(run)


def growing_gc(run):
    _cpu_note(run)
    grow(run)


def growing_roundup(run):
    _cpu_note(run)
    grow(run)


def growing_expandable(run):
    _cpu_note(run)
    grow(run)
