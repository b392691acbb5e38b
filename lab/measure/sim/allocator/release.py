"""What the allocator model frees before it gives up: garbage collection and oversize blocks.

Modelled on c10/cuda/CUDACachingAllocator.cpp (`garbage_collect_cached_blocks`,
`release_available_cached_blocks`, `get_free_block`'s counter, `insert_into_blocks`), read in
the stored copies named in lab/measure/sim/allocator/settings.py; rules, not code:

- A cache miss first runs garbage collection, when `garbage_collection_threshold` is set AND a
  memory fraction is (the model's `cap`): if reserved <= T x cap nothing happens; otherwise it
  frees whole cached segments of the large pool (not split, not expandable) whose age is at
  least the average age of such segments, again and again, until it has freed reserved - T x cap
  bytes or nothing is left to free. A block's age is how many free-block searches its pool has
  made since the block was cached (the counter counts only while GC is on).
- If the new segment still does not fit and `max_split_size_mb` is set, it frees one cached
  oversize block that is large enough for the request (at least max_split_size), or else the
  largest oversize blocks of the stream, largest first, until their bytes cover the request;
  then it tries once more. This is not counted in `num_alloc_retries`; only the last resort,
  freeing every whole cached segment, is.
"""

from __future__ import annotations

import bisect


class ReleaseRules:
    """Mixin of CachingAllocatorModel: uses `large`, `cap`, `gc_threshold`, `max_split_size`,
    `_release_segment`."""

    def _garbage_collect(self) -> None:
        threshold = int(self.gc_threshold * self.cap)
        if self.stats.reserved <= threshold:
            return
        target, reclaimed = self.stats.reserved - threshold, 0
        pool = self.large

        def freeable():
            return [pool.blocks[k] for k in pool.keys if not pool.blocks[k].is_split]

        whole = freeable()
        if not whole:
            return
        total_age = sum(pool.free_calls - b.gc_base for b in whole)
        count = len(whole)
        freed = True
        while reclaimed < target and freed and count > 0:
            age_threshold = total_age / count
            freed = False
            for k in list(pool.keys):
                b = pool.blocks.get(k)
                if b is None or b.is_split or b.seg is not None:
                    continue
                age = pool.free_calls - b.gc_base
                if age >= age_threshold:
                    freed = True
                    reclaimed += b.size
                    total_age -= age
                    count -= 1
                    self._release_segment(pool, b)

    def _release_available(self, pool, size: int, stream: int) -> bool:
        limit = self.max_split_size
        if limit == self.UNLIMITED:
            return False
        want = max(size, limit)
        keys = pool.keys
        i = bisect.bisect_left(keys, (stream, want, 0))
        b = pool.blocks[keys[i]] if i < len(keys) else None
        if b is not None and b.stream == stream and b.seg is None:
            if not b.is_split:
                self._release_segment(pool, b)
            return True
        # no single block is large enough: free the largest oversize blocks of this stream
        if i == 0:
            return False
        released, j = 0, i - 1
        while j >= 0 and released < want:
            b = pool.blocks[keys[j]]
            if b.size < limit or b.stream != stream:
                break
            if b.seg is None and not b.is_split:
                released += b.size
                self._release_segment(pool, b)  # removes keys[j]: everything below keeps its index
            j -= 1
        return released >= want
