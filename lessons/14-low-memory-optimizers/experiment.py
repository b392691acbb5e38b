"""Lesson 14: low-memory optimizers — bytes of optimizer state per parameter, measured.

The Qwen2-1.5B layout in fp32 (random weights), one 512-token sequence per step, `steps` steps:
with 1.5 billion parameters every byte of state per parameter is 1.5 GB, and at this batch the
weights, gradients and optimizer state outweigh the activations — the single-GPU fine-tuning
regime where the optimizer is the thing to shrink.

  baseline        torch.optim.AdamW(fused=True): exp_avg + exp_avg_sq in fp32, 8 B per parameter
                  (fused: one kernel per step, no weight-sized temporaries; lesson 13)
  adamw_8bit      torchao.optim.AdamW8bit: both moments quantized to 8 bits in blocks of 256
                  values, each block with an fp32 scale (an optional extra: memlab[torchao]);
                  its update run eagerly in both passes, what the tracker and sim can follow
  adamw_8bit_compiled  the same optimizer as torchao ships it: on CUDA the untracked timed pass
                  runs its torch.compile'd update, measured by the caching allocator
                  (timed_peak_allocated_bytes, timed_step_rise_bytes) and the clock; the tracked
                  pass cannot compile (dynamo refuses under a TorchDispatchMode) and runs eagerly;
                  CUDA only (elsewhere it would be adamw_8bit again)
  adafactor       torch.optim.Adafactor (torch >= 2.5): no first moment; the second moment of
                  an (R, C) matrix is factored into a row vector (R) and a column vector (C)
  bf16_state      AdamW with both moments stored in bf16 (written out below, 25 lines)
  fused_backward  AdamW stepped inside backward: one optimizer per parameter, stepped by
                  Tensor.register_post_accumulate_grad_hook as soon as that parameter's
                  gradient is complete, and the gradient freed at once — the full set of
                  gradients never exists (PyTorch's tutorial "How to save memory by fusing the
                  optimizer step into the backward pass")
"""

import os
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import torch

from lab.measure.torch_compat import is_traceable_wrapper_subclass, storage_key
from lab.workloads.data import lm_batch
from lab.workloads.models import build_model, lm_loss
from lab.workloads.registry import layout


def model_layout(run):
    p = run.p
    return replace(layout(p.layout), n_layer=p.layers, n_embd=p.hidden, d_ff=p.ff,
                   n_head=p.heads, n_kv_head=p.kv_heads, vocab_size=p.vocab)


# ---- bf16 optimizer state --------------------------------------------------------------------
class AdamWBf16State(torch.optim.Optimizer):
    """AdamW that stores exp_avg and exp_avg_sq in bf16 (2 + 2 B per parameter).

    The update is computed in fp32, one parameter at a time (the fp32 copies are temporaries of
    one parameter's size), then the moments are rounded back to bf16. The weights stay fp32.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = (group[k] for k in ("lr", "betas", "eps", "weight_decay"))
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0  # a Python int: no tensor, no value to read back
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.bfloat16)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.bfloat16)
                state["step"] += 1
                t, g = state["step"], p.grad
                m = state["exp_avg"].float().lerp_(g, 1 - beta1)  # fp32, this parameter only
                v = state["exp_avg_sq"].float().mul_(beta2).addcmul_(g, g, value=1 - beta2)
                state["exp_avg"].copy_(m)  # rounded to bf16
                state["exp_avg_sq"].copy_(v)
                p.mul_(1 - lr * wd)  # decoupled weight decay
                denom = v.div_(1 - beta2 ** t).sqrt_().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t))


# ---- torchao's 8-bit AdamW ---------------------------------------------------------------------
@contextmanager
def eager_torch_compile():
    """torchao compiles its per-parameter update with torch.compile(fullgraph=True). Under the
    lab's tensor tracker (a TorchDispatchMode) dynamo refuses to compile, and fullgraph=True turns
    that into an error; TORCHDYNAMO_DISABLE makes torch.compile return the plain function. Both
    passes (tracked and timed) run the same eager update: the same state, larger temporaries
    than the compiled kernels would make."""
    old = os.environ.get("TORCHDYNAMO_DISABLE")
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TORCHDYNAMO_DISABLE"]
        else:
            os.environ["TORCHDYNAMO_DISABLE"] = old


class StepWithin:
    """Wrap an optimizer so that each step() runs inside `context()` (a context manager)."""

    def __init__(self, opt, context):
        self.opt, self.context = opt, context

    def step(self):
        with self.context():
            self.opt.step()

    def zero_grad(self, set_to_none=True):
        self.opt.zero_grad(set_to_none=set_to_none)


def require_torchao():
    try:
        import torchao.optim
    except ImportError:
        raise RuntimeError("needs torchao, an optional extra: pip install 'memlab[torchao]'") from None
    return torchao.optim


def adamw_8bit_optimizer(run, params, as_shipped: bool = False):
    """torchao's AdamW8bit. Its update is torch.compile'd; it runs eagerly except, with
    `as_shipped`, in the untracked pass on a GPU (the tracker is a dispatch mode, and dynamo does
    not compile under one; sim has no timed pass)."""
    from torchao.optim import AdamW8bit, subclass_8bit

    if run.simulated:
        # The quantization map (256 values) is computed once, with .tolist(): it needs values,
        # which fake tensors do not have. Compute it for real; it is a constant.
        with run.real_values():
            subclass_8bit.get_qmap_signed(), subclass_8bit.get_qmap_unsigned()
    compiled = as_shipped and run.is_cuda and run.tracker is None
    return StepWithin(AdamW8bit(params, lr=1e-3, weight_decay=0.1),
                      nullcontext if compiled else eager_torch_compile)


# ---- the loop ----------------------------------------------------------------------------------
def state_bytes(optimizers) -> int:
    """Bytes held by the optimizers' state, each storage once. A tensor subclass (torchao's
    8-bit state) is counted by the plain tensors it wraps (codes, scales, lookup table)."""
    def plain(t):
        if is_traceable_wrapper_subclass(t):
            return [x for name in t.__tensor_flatten__()[0] for x in plain(getattr(t, name))]
        return [t]

    seen = {}
    for opt in optimizers:
        opt = getattr(opt, "opt", opt)
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor):
                    for t in plain(v):
                        s = t.untyped_storage()
                        seen[storage_key(s)] = s.nbytes()
    return sum(seen.values())


def warm_up_cublas(run):
    """cuda: cuBLAS allocates a workspace through the caching allocator at the first matrix
    product of each thread (the main one, and autograd's for backward). Make both now, so the
    allocator's deltas below count the optimizer's state and nothing else. sim: the allocator
    model takes the same workspaces at the same point (first in the segments, as on the GPU)."""
    if run.cuda_kernels:
        a = torch.ones(8, 8, device=run.device, requires_grad=True)
        (a @ a).sum().backward()


class UnseenByTracker:
    """cuda: how far the caching allocator's peak rose above where it started, beyond what the
    tensors the tracker saw account for: what the tracker misses. torchao's quantize and
    dequantize run inside OptimState8bit's __torch_dispatch__; the tracker lets that dispatch run
    under it (lab/measure/tracker.py), so this stays at rounding and cuBLAS workspaces.
    Measured from the start of a phase."""

    def __init__(self, run):
        self.run = run
        self.ok = run.is_cuda and run.tracker is not None  # the tracked pass on a GPU
        if self.ok:
            self.allocated = torch.cuda.memory_allocated(run.device)
            self.tracked = run.tracker.live_bytes

    def record(self, name: str) -> None:
        if self.ok:
            allocator_rise = torch.cuda.max_memory_allocated(self.run.device) - self.allocated
            tracked_rise = self.run.tracker.peak_bytes - self.tracked
            self.run.metric(name, allocator_rise - tracked_rise)


class TimedPassAllocator:
    """cuda, the untracked timed pass only: the caching allocator's own peaks, measured the same
    way in every variant. They are the memory numbers of a compiled update, which only that pass
    can run: timed_peak_allocated_bytes (max_memory_allocated over the loop) and
    timed_step_rise_bytes (how far it rose in the last step above where the step began)."""

    def __init__(self, run):
        self.run, self.peak = run, 0
        self.on = run.is_cuda and run.tracker is None
        if self.on:
            torch.cuda.reset_peak_memory_stats(run.device)

    def _read(self) -> None:
        self.peak = max(self.peak, torch.cuda.max_memory_allocated(self.run.device))

    @contextmanager
    def step(self):
        if not self.on:
            yield
            return
        self._read()  # the loop's peak so far, before the reset below
        start = torch.cuda.memory_allocated(self.run.device)
        torch.cuda.reset_peak_memory_stats(self.run.device)
        yield
        rise = torch.cuda.max_memory_allocated(self.run.device) - start
        self.run.metric("timed_step_rise_bytes", rise)  # each step's; the last one stays

    def finish(self) -> None:
        if self.on:
            self._read()
            self.run.metric("timed_peak_allocated_bytes", self.peak)


def train(run, make_optimizer=None, in_backward: bool = False):
    lay = model_layout(run)
    with run.phase("model", setup=True):
        warm_up_cublas(run)
        model = build_model(lay, run.device)  # fp32 weights
        params = list(model.parameters())
        if in_backward:
            # one optimizer per parameter, stepped the moment its gradient is complete
            optimizers = {p: torch.optim.AdamW([p], lr=1e-3, weight_decay=0.1, fused=True)
                          for p in params}

            def step_now(p):
                optimizers[p].step()
                optimizers[p].zero_grad(set_to_none=True)  # this gradient is freed here

            for p in params:
                p.register_post_accumulate_grad_hook(step_now)
            all_opts = list(optimizers.values())
        else:
            opt = make_optimizer(params)
            all_opts = [opt]
    n = sum(p.numel() for p in params)
    run.metric("parameters", n)
    cuda_before = None
    timed = TimedPassAllocator(run)
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device)
        if i == 0 and run.is_cuda:
            cuda_before = torch.cuda.memory_allocated(run.device)
        with run.phase(f"forward {i}"):
            loss = lm_loss(model, x, y)
        with run.phase(f"backward {i}"):
            loss.backward()  # fused_backward: the optimizer steps in here, parameter by parameter
        if not in_backward:
            with run.phase(f"step {i}"):
                unseen = UnseenByTracker(run) if i == run.p.steps - 1 else None
                with timed.step():
                    opt.step()
                if unseen is not None:
                    unseen.record("step_untracked_bytes")
            if run.tracker is not None:  # the tracked pass: how far the step's temporaries rose
                step = run.phases[-1]
                run.metric("step_rise_bytes", step.peak_bytes - step.start_bytes)
            with run.phase(f"zero_grad {i}"):
                opt.zero_grad(set_to_none=True)
        if i == 0:
            first_loss = run.item(loss)
            if cuda_before is not None:
                # after step 0 the gradients are freed and the activations too: what the
                # allocator gained since before forward 0 is the optimizer state (+ rounding)
                del loss
                run.metric("state_bytes_allocator", torch.cuda.memory_allocated(run.device) - cuda_before)
                run.metric("state_bytes_per_param_allocator",
                           run.metrics["state_bytes_allocator"] / n)
    timed.finish()
    nbytes = state_bytes(all_opts)
    run.metric("state_bytes", nbytes)
    run.metric("state_bytes_per_param", nbytes / n)
    run.metric("loss_first", first_loss)


def baseline(run):
    train(run, lambda params: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, fused=True))


def adamw_8bit(run):
    require_torchao()  # before building anything: say what is missing at once
    train(run, lambda params: adamw_8bit_optimizer(run, params))
    run.note("torchao's update ran eagerly (torch.compile is off under the lab's tracker, and in "
             "the timed pass too): the state is the compiled version's, the step's temporaries "
             "and time are not.")
    if run.is_cuda:
        run.note("Measured by the CUDA allocator alone: state_bytes_allocator is "
                 "memory_allocated() after step 0 minus before forward 0 (the gradients and "
                 "activations are freed again by then); step_untracked_bytes is how far the "
                 "allocator rose during the last step beyond the tensors the tracker saw "
                 "(torchao's quantize/dequantize intermediates are counted: the tracker lets its "
                 "tensor subclass's __torch_dispatch__ run under it).")


def adamw_8bit_compiled(run):
    if not run.is_cuda:
        raise NotImplementedError(
            "cuda only: torchao's compiled update is measured in the untracked pass on a GPU; "
            "here it would run eagerly, which is the adamw_8bit variant (see the H200 recording)")
    require_torchao()
    train(run, lambda params: adamw_8bit_optimizer(run, params, as_shipped=True))
    run.note("As torchao ships it: on CUDA the untracked timed pass ran the torch.compile'd update "
             "(its step time and timed_* allocator metrics); the tracked pass, under the lab's "
             "tracker, cannot compile and ran it eagerly, so this variant's tracked peak and "
             "timeline are adamw_8bit's.")


def adafactor(run):
    # torch.optim.Adafactor reads .item() of its step count and of each parameter's (and
    # update's) norm, only to compute its step size: a Python float that sizes no tensor
    why = ("torch.optim.Adafactor reads its step count and each parameter's norm only for its "
           "step size, which sizes no tensor")
    train(run, lambda params: StepWithin(torch.optim.Adafactor(params, lr=1e-2, foreach=False),
                                         lambda: run.stand_in_values(why)))


def bf16_state(run):
    train(run, lambda params: AdamWBf16State(params, lr=1e-3, weight_decay=0.1))


def fused_backward(run):
    train(run, in_backward=True)
