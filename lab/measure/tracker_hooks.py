"""A hook the tensor tracker installs while it records (lab/measure/tracker.py).

FSDP2 frees its all-gather buffers with `UntypedStorage.resize_(0)` after use and grows them
back before the next all-gather; no dispatcher op sees that, so while a tracker is on, that
method reports to it.
"""

from __future__ import annotations

import weakref

import torch


class ResizeHook:
    """While a tracker is on, `UntypedStorage.resize_` calls its `_resized(storage)`. Removed
    like the tracker's other hooks (`remove()`); nested trackers chain in order."""

    def __init__(self, tracker):
        self.original = torch.UntypedStorage.resize_
        ref = weakref.ref(tracker)
        original = self.original

        def resize_(storage, size):
            out = original(storage, size)
            tr = ref()
            if tr is not None:
                tr._resized(storage)
            return out

        torch.UntypedStorage.resize_ = resize_

    def remove(self) -> None:
        torch.UntypedStorage.resize_ = self.original
