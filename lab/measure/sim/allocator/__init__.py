"""The caching allocator's model: where a run's bytes land in segments, as PyTorch's CUDA
caching allocator would place them (lab.measure.sim.ports names the upstream code each follows).

A change to how memory is *placed* (block sizes, splitting, caching, settings, out-of-memory)
goes here; what *asks* for memory is the rest of sim. Import the modules themselves:

- model: the allocator's rules (rounding, pools, best fit, splits, merges, retry, OOM);
- expandable: expandable segments (`expandable_segments:True`);
- streams: blocks per stream, `record_stream`, a freed block waiting for its streams' events;
  an event completes at the next synchronisation point of its stream (the model's rule);
- release: what it frees before giving up (garbage collection, oversize blocks);
- settings: PYTORCH_CUDA_ALLOC_CONF, parsed and checked as the allocator does;
- replay: a run's allocations through the model, as they happen or from a log (`memlab fit`);
- view: the model as `torch.cuda.memory_stats()` and `memory_snapshot()` show it;
- stream_trace: a CUDA allocator trace with streams replayed through the model.

The model's API, streams included (lab.measure.sim.allocator.streams says what each does):

    m = CachingAllocatorModel(cap=None)          # model.CachingAllocatorModel
    block = m.malloc(nbytes, stream=0)           # stream: any hashable; 0 is the default stream
    m.record_stream(block, stream)               # Tensor.record_stream
    m.free(block)                                # waits while a recorded stream has not synced
    mark = m.event()                             # an Event recorded now
    m.synchronize(stream=None, upto=None)        # a sync point: that stream's (every stream's)
                                                 # events recorded before `upto` complete
    m.release_cached()                           # torch.cuda.empty_cache()
    m.stats.allocated, m.stats.peak_reserved, m.active_bytes, m.waiting

`replay.Replay` is the same with keys for live allocations (`alloc(key, nbytes, stream)`,
`free(key)`, `record_stream(key, stream)`, `synchronize(stream)`); `stream_trace` replays a
CUDA allocator trace that has streams and free_requested / free_completed pairs.
"""

__all__ = ["expandable", "model", "release", "replay", "settings", "streams", "view"]
