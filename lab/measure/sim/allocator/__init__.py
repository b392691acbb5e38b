"""The caching allocator's model: where a run's bytes land in segments, as PyTorch's CUDA
caching allocator would place them (lab.measure.sim.ports names the upstream code each follows).

A change to how memory is *placed* (block sizes, splitting, caching, settings, out-of-memory)
goes here; what *asks* for memory is the rest of sim. Import the modules themselves:

- model: the allocator's rules (rounding, pools, best fit, splits, merges, retry, OOM);
- expandable: expandable segments (`expandable_segments:True`);
- release: what it frees before giving up (garbage collection, oversize blocks);
- settings: PYTORCH_CUDA_ALLOC_CONF, parsed and checked as the allocator does;
- replay: a run's allocations through the model, as they happen or from a log (`memlab fit`);
- view: the model as `torch.cuda.memory_stats()` and `memory_snapshot()` show it.
"""

__all__ = ["expandable", "model", "release", "replay", "settings", "view"]
