"""Where a library branches on tensor *values*, which fake tensors do not have.

transformers decides from values whether an attention mask must be materialised: with no padding
and no packed sequences it passes `attn_mask=None, is_causal=True` to SDPA (and CUDA runs flash /
efficient attention); a fake tensor counts as "tracing" for it, so under sim it would build a
(B, 1, T, T) mask instead and SDPA would save it in every layer. Sim assumes what the lab's
workloads feed: no padding, one sequence per row. While `ValueAssumptions` is active:

  transformers.masking_utils.find_packed_sequence_indices(fake)  -> None (not packed; its ops
                                                                      still run, as on the GPU)
  transformers.masking_utils._ignore_causal_mask_sdpa(fake, ...)  -> as for no padding mask
  transformers.masking_utils._ignore_bidirectional_mask_sdpa(fake, ...)  -> likewise

(checked against transformers 5.17, which recorded the H200 runs, and 5.24). The patch goes in
the first time an op runs after `transformers.masking_utils` was imported, and comes out on exit.

Some code reads a value only to compute a Python scalar that sizes nothing: torch.optim.Adafactor
takes `.item()` of its step count and of each parameter's norm for its step size. An experiment
that knows this opens `run.stand_in_values(why)` around that code; inside it, `.item()` of a fake
tensor answers a stand-in (1, 1.0 or True) instead of failing, and the result notes why.
"""

from __future__ import annotations

import sys

import torch
from ...torch_compat import FakeTensor, disable_current_modes
from ..patches import Swaps

_MODULE = "transformers.masking_utils"


def _fake(t) -> bool:
    return isinstance(t, FakeTensor)


class ValueAssumptions:
    def __init__(self):
        self._swaps = Swaps()
        self.active = False

    def maybe_patch(self) -> None:
        """Cheap to call often: patches once the library is imported."""
        if self.active or _MODULE not in sys.modules:
            return
        mu = sys.modules[_MODULE]
        self.active = True
        find = getattr(mu, "find_packed_sequence_indices", None)
        if find is not None:
            def find_packed(position_ids, *a, **k):
                out = find(position_ids, *a, **k)  # its ops run (and allocate) as on the GPU
                if not _fake(position_ids):
                    return out
                if out is not None:  # the check the GPU makes on values: same ops, answer assumed
                    (out[:, -1] == 0).all()
                return None

            self._swaps.replace(mu, "find_packed_sequence_indices", find_packed)
        for name in ("_ignore_causal_mask_sdpa", "_ignore_bidirectional_mask_sdpa"):
            orig = getattr(mu, name, None)
            if orig is not None:
                self._swaps.replace(mu, name, _no_fake_padding(orig))

    def restore(self) -> None:
        self._swaps.restore()
        self.active = False


def _no_fake_padding(orig):
    def wrapper(padding_mask, *a, **k):
        return orig(None if _fake(padding_mask) else padding_mask, *a, **k)

    return wrapper


LOCAL_SCALAR = torch.ops.aten._local_scalar_dense.default  # what .item() / float(t) dispatch to


def stand_in_scalar(t: torch.Tensor):
    """`t.item()` inside `run.stand_in_values`: a stand-in for a fake tensor, the value otherwise
    (a real constant made outside the fake mode)."""
    if not _fake(t):
        with disable_current_modes():
            return t.item()
    if t.dtype == torch.bool:
        return True
    return 1.0 if t.dtype.is_floating_point or t.dtype.is_complex else 1
