"""Streams in the allocator model: a block used on another stream than its own is reused only
after that stream's work on it is done (`record_stream`).

Modelled on c10/cuda/CUDACachingAllocator.cpp (`recordStream`, `free`, `insert_events`,
`process_events`, `synchronize_and_free_events`, `free_block`, `try_merge_blocks`), read in the
stored copies of torch 2.x named in lab/measure/sim/allocator/settings.py (the 2.12-2.13 one and
pytorch/pytorch at 001074d: the rules agree; torch 2.11 lies between them); rules, not code:

- A block belongs to the stream it was allocated on. Freed, it goes back to that stream's pool
  only: a pool is ordered by (stream, size, address) and a request looks among its own stream's
  blocks (`get_free_block`), so two streams never share a cached block.
- `record_stream(block, s)` with s not the block's stream adds s to the block's stream uses (a
  use on its own stream needs nothing).
- `free(block)` of a block with stream uses: `memory_allocated()` drops at once, but the block
  is not cached. An event is recorded on each stream that used it; the block stays *active*
  (`active_bytes`; "active_pending_free" in a snapshot): not reusable, not merged with its
  neighbours, its segment not releasable, until all its events have completed.
- Every malloc first gives back the blocks whose events all completed (`process_events`: per
  stream, in the order recorded, up to the first that has not).
- `empty_cache()` and the last resort before out-of-memory wait for every event first
  (`synchronize_and_free_events`, counted in `num_sync_all_streams`): pending blocks go back to
  their pools, then every whole cached segment is freed.

When an event completes is the GPU's business: the host runs ahead of the GPU by an amount no
model of the host's code can know. THE MODEL'S RULE: an event completes at the next
synchronisation point of its stream - `synchronize(stream)` (torch.cuda.synchronize(): every
stream; Stream.synchronize(); Event.synchronize(): that stream up to the event; a value read on
that stream). Until then the host is taken to be ahead of the GPU (the usual case when a stream
copies gigabytes over PCIe): blocks wait as long as they can, so where blocks wait, the model's
reserved memory is the most the GPU can reserve, reached when the GPU lags the host the most.
Allocated memory does not depend on the rule (it drops at the free).

The API (sim's Replay, a trace replay and the counterfactual replays drive it):

    block = model.malloc(nbytes, stream)        # stream: any hashable; 0 is the default stream
    model.record_stream(block, stream)          # a use of the block on another stream
    model.free(block)                           # pending while a recorded stream has not synced
    mark = model.event()                        # "an event recorded now" (Event.record)
    model.synchronize(stream)                   # that stream's events so far complete
    model.synchronize(stream, upto=mark)        # ... those recorded before `mark` (Event.synchronize)
    model.synchronize()                         # every stream's (torch.cuda.synchronize())
    model.process_events()                      # done by every malloc: completed blocks return

Replaying an allocator trace whose entries say when each free completed (free_requested, then
free_completed later): `record_stream(block, key)` with a stream key of that block's own, then
at its free_completed `synchronize(key)` and `process_events()`
(lab.measure.sim.allocator.stream_trace).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from itertools import count


class StreamUses:
    """Mixin of CachingAllocatorModel: the stream half of freeing. Uses `_free_block` (a block
    back into its pool), `stats`, `active`. Call `_init_streams()` from `__post_init__`."""

    def _init_streams(self) -> None:
        self._events: dict[Hashable, deque] = {}  # stream -> deque of (seq, block), in order
        self._seq = count()  # allocator events, numbered as they are recorded
        self._next = 0  # the number the next event gets
        self._synced: dict[Hashable, int] = {}  # stream -> events numbered below it completed
        self._synced_all = 0  # every stream's events numbered below it completed
        self.pending_bytes = 0  # freed blocks that wait for events (active, not allocated)
        self.peak_active = 0  # active bytes' peak, while blocks wait (else peak_allocated)
        self.num_sync_all_streams = 0

    # ---- public --------------------------------------------------------------------------
    def record_stream(self, block, stream: Hashable) -> None:
        if stream == block.stream or not block.allocated:
            return
        if block.uses is None:
            block.uses = set()
        block.uses.add(stream)

    def event(self) -> int:
        """A mark for "now": `synchronize(stream, upto=mark)` completes the events recorded
        before it (an Event recorded on `stream` now, then synchronized)."""
        return self._next

    def synchronize(self, stream: Hashable | None = None, upto: int | None = None) -> None:
        """The events recorded on `stream` (None: on every stream) before `upto` (None: so far)
        have completed. Their blocks return at the next malloc (process_events), as on the GPU."""
        mark = self._next if upto is None else upto
        if stream is None:
            self._synced_all = max(self._synced_all, mark)
        elif mark > self._synced.get(stream, 0):
            self._synced[stream] = mark

    def process_events(self) -> None:
        """Blocks whose events have all completed go back to their pools."""
        for stream in list(self._events):
            queue = self._events[stream]
            done = max(self._synced.get(stream, 0), self._synced_all)
            while queue and queue[0][0] < done:
                _, block = queue.popleft()
                self._event_done(block)
            if not queue:
                del self._events[stream]

    @property
    def waiting(self) -> bool:
        """Some freed block waits for an event."""
        return bool(self._events)

    @property
    def active_bytes(self) -> int:
        return self.stats.allocated + self.pending_bytes

    # ---- the allocator's own ----------------------------------------------------------------
    def _insert_events(self, block) -> None:
        """`free` of a block with stream uses: an event on each stream that used it."""
        for stream in block.uses:
            seq = next(self._seq)
            self._next = seq + 1
            self._events.setdefault(stream, deque()).append((seq, block))
            block.events += 1
        block.uses = None
        self.pending_bytes += block.size
        self.peak_active = max(self.peak_active, self.active_bytes)

    def _event_done(self, block) -> None:
        block.events -= 1
        if block.events == 0:
            self.pending_bytes -= block.size
            self._free_block(block)

    def _sync_and_free_events(self) -> None:
        """empty_cache() and the out-of-memory retry wait for every outstanding event."""
        self.num_sync_all_streams += 1
        if not self._events:
            return
        for queue in self._events.values():
            for _, block in queue:
                self._event_done(block)
        self._events.clear()


__all__ = ["StreamUses"]
