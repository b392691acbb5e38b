"""The vocabulary of a PyTorch memory snapshot (`torch.cuda.memory._snapshot()`, what
`_dump_snapshot` pickles and pytorch.org/memory_viz reads): the one place its action and state
names are spelled, for the lab's writer (lab.measure.snapshot), its readers (lab.snapshots) and
the allocator model's trace replay (lab.measure.sim.allocator.replay). Torch-free.

A snapshot's `device_traces[d]` is the allocator's own event list, each entry an `action` with
`addr`, `size`, `time_us` and (with stacks="python") `frames`; its `segments` hold blocks in
the states below.
"""

from __future__ import annotations

ALLOC = "alloc"  # a block handed out
FREE_REQUESTED = "free_requested"  # the tensor died; the block may wait for its stream
FREE = "free_completed"  # the block is back in the cache
SEGMENT_ALLOC, SEGMENT_FREE = "segment_alloc", "segment_free"  # cudaMalloc / cudaFree: reserved
SEGMENT_MAP, SEGMENT_UNMAP = "segment_map", "segment_unmap"  # expandable segments' pages
OOM = "oom"  # the request that failed
SNAPSHOT = "snapshot"  # where _snapshot() was taken

SEGMENT_UP = (SEGMENT_ALLOC, SEGMENT_MAP)
SEGMENT_DOWN = (SEGMENT_FREE, SEGMENT_UNMAP)
ACTIONS = (ALLOC, FREE_REQUESTED, FREE, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP,
           OOM, SNAPSHOT)
# a segment's blocks: handed out (memory_allocated() counts these), or cached
ACTIVE_ALLOCATED, INACTIVE = "active_allocated", "inactive"
ACTIVE_PENDING_FREE = "active_pending_free"  # freed, waiting for another stream's events
ACTIVE_STATES = (ACTIVE_ALLOCATED, ACTIVE_PENDING_FREE, "active_awaiting_free")

__all__ = ["ACTIONS", "ACTIVE_ALLOCATED", "ACTIVE_PENDING_FREE", "ACTIVE_STATES", "INACTIVE", "ALLOC", "FREE", "FREE_REQUESTED", "OOM", "SEGMENT_ALLOC",
           "SEGMENT_DOWN", "SEGMENT_FREE", "SEGMENT_MAP", "SEGMENT_UNMAP", "SEGMENT_UP", "SNAPSHOT"]
