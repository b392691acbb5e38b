"""Lesson 28: streams and overlapped offload — copying saved activations on a side stream, and
what the caching allocator's stream rules make of it.

Lesson 24's GPT-2 step (bf16 autocast, AdamW), its saved activations kept, offloaded or recomputed:

    baseline             autograd keeps every saved tensor on the GPU
    save_on_cpu          torch.autograd.graph.save_on_cpu(pin_memory=True): each copy blocks
    overlapped           each saved tensor copied to pinned memory on a side stream, the compute
                         stream going on meanwhile; t.record_stream(side) so that its block is
                         not reused before the copy has read it
    overlapped_bounded   the same, the host waiting for the copy of the 4th-last saved tensor
                         before it goes on (at most 4 copies in flight)
    no_record_stream     the classic bug: the same copies without record_stream; the block goes
                         back to the compute stream's pool at once, while the copy still reads it
    checkpointing        recomputation instead (transformers' activation checkpointing)

The offload is a pair of saved_tensors_hooks, as torchtune's OffloadActivations is built:

    side = torch.cuda.Stream()
    def pack(t):                                   # forward: autograd saves t
        side.wait_stream(torch.cuda.current_stream())   # t has been computed
        with torch.cuda.stream(side):
            host = torch.empty(t.size(), dtype=t.dtype, pin_memory=True)
            host.copy_(t, non_blocking=True)
        t.record_stream(side)                      # its block waits for the copy once freed
        return host
    def unpack(host):                              # backward: the op needs t again
        torch.cuda.current_stream().wait_stream(side)
        return host.to("cuda", non_blocking=True)

Every offloaded tensor's checksum (the integer sum of its bits, on the compute stream, before the
copy) is compared in backward with the checksum of what came back: `corrupted_saved_tensors` counts those that differ
(on the GPU; sim has no values). The loop waits for each step's end (as one that prints its
loss does).

Modes: cuda and sim (on the CPU there is no device to offload from and no stream to overlap).
On the GPU the code runs on torch.cuda; in sim the same code runs on torch.cpu's streams, which
the allocator model follows (lab/measure/sim/kernels/streams.py: a block used on a side stream
is reused after that stream's next synchronisation point), and the pinned copies are the pinned
host model's (lab/measure/sim/kernels/offload.py).
"""

from collections import deque
from contextlib import nullcontext

import torch
from torch.autograd.graph import saved_tensors_hooks

from lab.workloads import TrainConfig
from lab.workloads.phases import phase
from lab.workloads.tasks import LM
from lab.workloads.train import autocast, enable_checkpointing, get_batch, setup


_SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def checksum(t):
    """The sum of t's bits as integers of t's own width, wrapping: exact, so the same whatever
    the order of the reduction. A float sum is not: the copy is contiguous where a saved tensor
    may not be (a transposed view), and summing the two layouts in different orders gives
    different floats (the first GPU recording counted 44 such "corrupted" tensors with
    record_stream). The same width matters too: a sum into a wider dtype (int16 -> int64)
    first copies the whole tensor to that dtype, which raised the second recording's reserved
    memory by gigabytes; a sum into its own dtype reads it in place."""
    bits = t.view(_SAME_WIDTH_INT[t.element_size()])
    return bits.sum(dtype=bits.dtype)


class OverlappedOffload(saved_tensors_hooks):
    """Saved tensors copied to pinned host memory on a side stream (module docstring).
    `record_stream`: keep the block until the copy has read it; `in_flight`: the host waits for
    the copy of the `in_flight`-th last tensor (None: never)."""

    def __init__(self, run, *, record_stream: bool = True, in_flight: int | None = None):
        self.run = run
        self.check = not run.simulated  # checksums need values
        dev = torch.get_device_module(run.device)  # torch.cuda; torch.cpu in sim
        self.dev, self.side = dev, dev.Stream()
        self.record_stream, self.in_flight = record_stream, in_flight
        self.copies: deque = deque()  # events of the copies in flight (overlapped_bounded)
        self.offloaded = 0
        self.corrupted = torch.zeros((), dtype=torch.int64, device=run.device) if self.check else None
        super().__init__(self.pack, self.unpack)

    def pinned_like(self, t):
        if self.run.simulated:  # a fake tensor: the host copy is the pinned model's
            return self.run.backend.pinned_host.pinned_like(t)
        return torch.empty(t.size(), dtype=t.dtype, pin_memory=True)

    def pack(self, t):
        # parameters stay (the model keeps them anyway), and tensors under the scale's
        # min_offload bytes (torchtune's min_offload_size: a copy too small to be worth it)
        if isinstance(t, torch.nn.Parameter) or \
                t.numel() * t.element_size() < self.run.p.min_offload:
            return t
        total = checksum(t) if self.check else None  # before the copy, in stream order
        self.side.wait_stream(self.dev.current_stream())  # the copy starts after t is computed
        with self.dev.stream(self.side):
            host = self.pinned_like(t)
            if not self.run.simulated:
                host.copy_(t, non_blocking=True)
            if self.in_flight is not None:
                self.copies.append(self.side.record_event())
        if self.record_stream:
            t.record_stream(self.side)  # freed, t's block waits for this copy
        if self.in_flight is not None and len(self.copies) > self.in_flight:
            self.copies.popleft().synchronize()  # the host waits for an older copy
        self.offloaded += 1
        return host, t.device, total

    def unpack(self, packed):
        if isinstance(packed, torch.Tensor):
            return packed
        host, device, total = packed
        self.dev.current_stream().wait_stream(self.side)  # the copy to the host is done
        if self.run.simulated:
            return torch.empty(host.size(), dtype=host.dtype, device=device)
        back = host.to(device, non_blocking=True)
        if self.check:
            self.corrupted += checksum(back) != total
        return back


def train(run, *, offload=None, checkpointing=False):
    task = LM(run.p.layout, run.p.batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(precision="bf16"))
    if checkpointing:
        enable_checkpointing(model, "hf")
    hooks = offload(run) if offload else None
    dev = torch.get_device_module(run.device)
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)
        with run.phase(phase("forward", i)):
            with hooks or nullcontext(), autocast(run.device, "bf16"):
                loss = task.loss(model, x, y)
        with run.phase(phase("backward", i)):
            loss.backward()
        with run.phase(phase("step", i)):
            opt.step()
        with run.phase(phase("zero_grad", i)):
            opt.zero_grad(set_to_none=True)
        dev.synchronize()  # the loop waits for the step (as one that prints its loss does)
    if isinstance(hooks, OverlappedOffload):
        run.metric("offloaded_tensors", hooks.offloaded)
        if hooks.check:
            run.metric("corrupted_saved_tensors", int(hooks.corrupted))
    st = torch.cuda.host_memory_stats() if hasattr(torch.cuda, "host_memory_stats") else {}
    if st:  # the pinned blocks handed out at once: CUDA's counters, the model's in sim
        run.metric("pinned_active_peak", st.get("active_bytes.peak", 0))


def baseline(run):
    train(run)


def save_on_cpu(run):
    train(run, offload=lambda r: torch.autograd.graph.save_on_cpu(pin_memory=True))


def overlapped(run):
    train(run, offload=OverlappedOffload)


def overlapped_bounded(run):
    train(run, offload=lambda r: OverlappedOffload(r, in_flight=4))


def no_record_stream(run):
    train(run, offload=lambda r: OverlappedOffload(r, record_stream=False))


def checkpointing(run):
    train(run, checkpointing=True)
