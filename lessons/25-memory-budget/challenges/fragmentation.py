"""Challenge: this loop runs out of memory although its tensors fit. Make it fit without
changing the size of any tensor.

On a GPU capped at 3 GiB: a 2 GiB buffer is made and freed, a 100 MiB tensor is kept, and the
2 GiB buffer is made again (lesson 23's pattern). The tensors never need more than 2.25 GB at
once; the allocator's segments do. `memlab challenge check fragmentation` runs your copy in sim
under the 3 GiB cap (the allocator model follows PyTorch's rules, settings included) and checks
that it finished and that every tensor still has its size.

Everything in lessons 17 and 23 is allowed: the order of the lines, the allocator's settings,
empty_cache(). This file runs in a process that has already started, so a setting has to be
switched at run time, through torch.cuda.memory._set_allocator_settings(...): a private call,
deprecated in torch 2.13, which resets the options its string does not name. In your own
scripts, set PYTORCH_ALLOC_CONF (or PYTORCH_CUDA_ALLOC_CONF) before CUDA starts instead.
"""

import torch


def challenge(run):
    u8 = dict(dtype=torch.uint8, device=run.device)
    with run.phase("big buffer"):
        buf = torch.empty(run.p.big_bytes, **u8)
    with run.phase("free it"):
        del buf
    with run.phase("small tensor kept"):
        keep = torch.empty(run.p.small_bytes, **u8)
    with run.phase("big buffer again"):
        buf = torch.empty(run.p.big_bytes, **u8)
    run.metric("sizes_ok", keep.numel() == run.p.small_bytes and buf.numel() == run.p.big_bytes)
