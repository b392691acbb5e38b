"""Lesson 08: mixed precision — fp32 vs autocast bf16 vs autocast fp16 + GradScaler vs pure bf16.

The training step (lab/workloads/train.py) does, for bf16 / fp16:

    with torch.autocast(device_type=run.device.type, dtype=torch.bfloat16):  # or float16
        logits = model(x)                                   # matmuls run in 16 bits
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))  # autocast runs it in fp32
    scaler.scale(loss).backward()   # fp16 only, CUDA only: torch.amp.GradScaler("cuda")
    scaler.step(optimizer); scaler.update()

The weights, their gradients and the optimizer state stay fp32 in those three variants: autocast
casts copies of the weights for each matmul (and caches them until the autocast region exits);
it does not convert the model.

pure_bf16 converts the model instead: the weights are made in bf16, so their gradients and
AdamW's exp_avg / exp_avg_sq (zeros_like the weights) are bf16 too, and no autocast is used.
"""

from lab.workloads import TrainConfig
from lab.workloads.tasks import LM
from lab.workloads.train import train


def run_with(run, precision):
    if precision == "fp16" and run.device.type != "cuda":
        run.note("fp16 without a GradScaler here: the scaler is CUDA-only in this lab; memory is "
                 "the same, the loss scaling that keeps small fp16 gradients alive is not shown.")
    train(run, LM(run.p.layout, run.p.batch, run.p.seq), TrainConfig(precision=precision),
          run.p.steps)


def baseline(run):
    run_with(run, "fp32")


def bf16(run):
    run_with(run, "bf16")


def fp16(run):
    run_with(run, "fp16")


def pure_bf16(run):
    # every parameter born in bf16 (lab.workloads: TrainConfig(precision="pure-bf16")); the
    # optimizer is made after, so its state is bf16 as well; no autocast
    run_with(run, "pure-bf16")
