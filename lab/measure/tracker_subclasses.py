"""Wrapper tensor subclasses, as the tensor tracker sees them.

A traceable wrapper subclass (`__tensor_flatten__`) owns no memory: its storage is a phantom of
its appearance size. What it wraps is counted instead (`inner_tensors`). Its own
`__torch_dispatch__` may run ops on those inner tensors (torchao's 8-bit optimizer state
dequantizes and quantizes there); `opens_up` says when the tracker should hand an op on so that
those ops run under it and are counted.
"""

from __future__ import annotations

import torch
from .torch_compat import is_traceable_wrapper_subclass, is_traceable_wrapper_subclass_type


def inner_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors that hold a wrapper subclass's memory (torchao's 8-bit optimizer state:
    uint8 codes, fp32 scales and a lookup table). The wrapper itself owns none: its storage
    reports the appearance size (numel × the dtype it poses as) and has no data pointer. A
    DTensor (FSDP2's sharded parameters, gradients, optimizer state) likewise: its local shard."""
    out = []
    for name in t.__tensor_flatten__()[0]:
        inner = getattr(t, name)
        if not isinstance(inner, torch.Tensor):  # a DTensor also names its device mesh here
            continue
        out += inner_tensors(inner) if is_traceable_wrapper_subclass(inner) else [inner]
    return out


_OPENS_UP: dict = {}


def opens_up(types) -> bool:
    """Does one of the op's tensor types run ops of its own that the tracker should see: a
    traceable wrapper subclass other than DTensor. (A DTensor is counted by its local shard; the
    collectives and redistributions its dispatch runs are lab/measure/distributed.py's concern.)"""
    for t in types:
        hit = _OPENS_UP.get(t)
        if hit is None:
            hit = is_traceable_wrapper_subclass_type(t) and not _is_dtensor_type(t)
            _OPENS_UP[t] = hit
        if hit:
            return True
    return False


def _is_dtensor_type(t) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed: no DTensor
        return False
    return issubclass(t, DTensor)
