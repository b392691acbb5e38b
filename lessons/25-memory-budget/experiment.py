"""Lesson 25: the memory budget of a training step — every term, and which one sets the peak.

SmolLM2-360M (a Llama-style model the course has not used: 32 layers, hidden 960, grouped-query
attention 15:5, a tied 49,152-token embedding; random weights from assets/models), B x T tokens,
AdamW, the plain loop a user writes (`model(input_ids=x, labels=y).loss`):

    bytes = weights + gradients + optimizer state        per parameter, by regime (below)
          + activations                                  per token per layer, by precision
          + the logits term                              B x T x V, in the loss's precision
          + temporaries (the largest op's scratch, the optimizer's foreach intermediates)

    regime          weights  gradients  AdamW state        per parameter
    baseline        fp32 4   fp32 4     fp32 m, v  8       16
    autocast        fp32 4   fp32 4     8                  16, + a bf16 copy of the weights
                                                           (2) cached for the step
    pure_bf16       bf16 2   bf16 2     bf16 m, v  4       8
    master_weights  bf16 2   bf16 2     fp32 master 4 + m, v 8   16, + fp32 master gradients
                                                           (4) during the step
    lora            fp32 4 frozen, no gradient, no state;  16 per adapter parameter (rank r on
                    every linear of every layer)

The challenges at the end of lesson.md start from files in challenges/ (the learner edits a
copy: `memlab challenge start ID`); their reference solutions are variants here, recorded on the
H200 like every variant, so each answer is shown to be real. A challenge's starting point is
also a variant (it calls the very file the learner gets).
"""

import importlib.util
from pathlib import Path

import torch

from lab.workloads import TrainConfig
from lab.workloads.phases import phase
from lab.workloads.tasks import HFModel
from lab.workloads.train import autocast, enable_checkpointing

HERE = Path(__file__).resolve().parent


def starter(name: str):
    """challenges/NAME.py, the file a learner starts from."""
    spec = importlib.util.spec_from_file_location(f"memlab_challenge_{name}", HERE / "challenges" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.challenge


def cap_gpu(run, nbytes: int) -> None:
    """Run as on a GPU of `nbytes` (set_per_process_memory_fraction; in sim the model's cap)."""
    if run.cuda_kernels:
        total = torch.cuda.get_device_properties(run.device).total_memory if run.is_cuda else 150_109_880_320
        torch.cuda.set_per_process_memory_fraction(min(1.0, nbytes / total), run.device if run.is_cuda else None)
        run.metric("gpu_cap", nbytes)
    else:
        run.note("A GPU cap means nothing on the CPU: the tensors run without one.")


# ---- one training step, any regime ---------------------------------------------------------------
def train(run, *, dtype=torch.float32, precision="fp32", params=None, checkpointing="none",
          step=None):
    task = HFModel(run.p.model, run.p.batch, run.p.seq)
    with run.phase("model", setup=True):
        model = task.build(run.device, dtype)
        enable_checkpointing(model, checkpointing)
        trainable = params(model) if params else list(model.parameters())
        opt = torch.optim.AdamW(trainable, lr=1e-4) if step is None else None
    run.metric("param_count", sum(p.numel() for p in model.parameters()))
    run.metric("trainable_count", sum(p.numel() for p in trainable))
    do_step = step(trainable) if step is not None else None
    for i in range(run.p.steps):
        with run.phase(phase("data", i), category="inputs", setup=True):
            x, y = task.get(i, run.device)  # (B, T) token ids
        with run.phase(phase("forward", i)) as fwd:
            with autocast(run.device, precision):
                loss = task.loss(model, x, y)  # logits (B, T, V) inside, upcast to fp32
        if i == 0 and run.tracker is not None:  # the tracked pass: bytes the forward kept
            kept = fwd.end_bytes - fwd.start_bytes  # activations + logits, for backward
            layers = model.config.num_hidden_layers
            run.metric("kept_per_token_layer", kept / (run.p.batch * run.p.seq * layers))
        with run.phase(phase("backward", i)):
            loss.backward()
        with run.phase(phase("step", i)):
            opt.step() if do_step is None else do_step()
        with run.phase(phase("zero_grad", i)):
            for p in trainable:
                p.grad = None


def baseline(run):
    train(run)


def autocast_bf16(run):
    train(run, precision="bf16")


def pure_bf16(run):
    train(run, dtype=torch.bfloat16)


def master_weights(run):
    """bf16 weights and gradients for forward and backward; the update on fp32 master copies."""

    def step(params):
        master = [p.detach().float() for p in params]  # fp32 copies, 4 B per parameter
        opt = torch.optim.AdamW(master, lr=1e-4)  # fp32 m, v: 8 B per parameter

        def update():
            for m, p in zip(master, params):
                m.grad = p.grad.float()  # fp32 master gradients, during the step
            opt.step()
            for m, p in zip(master, params):
                p.data.copy_(m)  # back to bf16 (rounded)
                m.grad = None
        return update

    train(run, dtype=torch.bfloat16, step=step)


class LoRALinear(torch.nn.Module):
    """y = W x + (alpha / r) B A x, with W frozen and only A (r, in), B (out, r) trained."""

    def __init__(self, base: torch.nn.Linear, r: int, alpha: int):
        super().__init__()
        self.base, self.scale = base, alpha / r
        base.weight.requires_grad_(False)
        dev, dt = base.weight.device, base.weight.dtype
        self.A = torch.nn.Parameter(torch.randn(r, base.in_features, device=dev, dtype=dt) / r)
        self.B = torch.nn.Parameter(torch.zeros(base.out_features, r, device=dev, dtype=dt))

    def forward(self, x):
        return self.base(x) + (x @ self.A.t() @ self.B.t()) * self.scale


def add_lora(model, r: int) -> list:
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, LoRALinear(child, r, 2 * r))
    return [p for p in model.parameters() if p.requires_grad]


def lora(run):
    train(run, params=lambda model: add_lora(model, run.p.lora_rank))


# ---- the challenges: starting points and reference solutions -------------------------------------
def fit_16gib_start(run):
    cap_gpu(run, run.p.challenge_gpu)
    starter("fit_16gib")(run)


def fit_16gib_solution(run):
    # bf16 weights, gradients and AdamW state (8 B per parameter instead of 16) and every layer
    # checkpointed: the same batch, on a 16 GiB GPU
    cap_gpu(run, run.p.challenge_gpu)
    train(run, dtype=torch.bfloat16, checkpointing="hf")


def halve_eval_start(run):
    starter("halve_eval")(run)


def halve_eval_solution(run):
    with torch.no_grad():  # the one line: no graph, so no saved activations between batches
        starter("halve_eval")(run)


def fragmentation_start(run):
    cap_gpu(run, run.p.fragment_gpu)
    starter("fragmentation")(run)


def fragmentation_solution(run):
    cap_gpu(run, run.p.fragment_gpu)
    if run.cuda_kernels:
        # lesson 23: a segment of mapped pages, whose free pages can move to the big request
        torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    starter("fragmentation")(run)
