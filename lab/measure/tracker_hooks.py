"""What the tensor tracker needs for torch.distributed's tensors (lab/measure/tracker.py).

- A DTensor (FSDP2's sharded parameters, their gradients and optimizer state) is a wrapper
  subclass with no memory of its own: its local shard is what a rank holds.
- FSDP2 frees its all-gather buffers with `UntypedStorage.resize_(0)` after use and grows them
  back before the next all-gather; no dispatcher op sees that, so while a tracker is on, that
  method reports to it.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

_WRAPPER_TYPES: dict[type, bool] = {torch.Tensor: False, torch.nn.Parameter: False}


def is_wrapper(t: torch.Tensor) -> bool:
    """A tensor subclass that wraps others (DTensor); FakeTensor and plain tensors are not.
    Decided once per type: this runs on every output of every op."""
    hit = _WRAPPER_TYPES.get(type(t))
    if hit is None:
        hit = _WRAPPER_TYPES[type(t)] = is_traceable_wrapper_subclass(t)
    return hit


def inner_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    names, _ = t.__tensor_flatten__()
    inner = (getattr(t, n) for n in names)  # DTensor also names its device mesh here
    return [x for x in inner if isinstance(x, torch.Tensor)]


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
