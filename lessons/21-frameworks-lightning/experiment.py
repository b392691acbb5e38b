"""Lesson 21: frameworks do it for you — the same techniques as PyTorch Lightning Trainer flags.

By hand (baseline), as in lessons 08-10:
    bf16 autocast + gradient checkpointing + 4 micro-batches accumulated per optimizer step

With Lightning (an optional extra: pip install 'memlab[lightning]'):
    Trainer(precision="bf16-mixed", accumulate_grad_batches=4, ...)
    + model.gradient_checkpointing_enable() in the LightningModule (a transformers switch)

Lightning runs the same PyTorch calls (torch.autocast, backward, optimizer.step, zero_grad);
the lesson measures whether the memory is the same too. Both loops mark the same phases, so the
tracker names the same categories and the step times cover the same synchronizations.
"""

import importlib

import torch

from lab.workloads import TrainConfig
from lab.workloads.data import lm_batch
from lab.workloads.models import build_model, lm_loss
from lab.workloads.registry import layout
from lab.workloads.tasks import LM
from lab.workloads.train import enable_checkpointing, make_optimizer, train


def by_hand(run):
    cfg = TrainConfig(precision="bf16", checkpointing="hf", micro_batches=run.p.micro_batches)
    train(run, LM(run.p.layout, run.p.batch, run.p.seq), cfg, run.p.steps)


def import_lightning():
    for name in ("pytorch_lightning", "lightning.pytorch"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ModuleNotFoundError(
        "this variant needs PyTorch Lightning, an optional extra: pip install 'memlab[lightning]' "
        "(the baseline variant shows the same techniques by hand)")


def with_lightning(run):
    pl = import_lightning()
    lay = layout(run.p.layout)
    n = run.p.micro_batches

    class LitLM(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = build_model(lay, run.device)
            enable_checkpointing(self.model, "hf")  # a transformers switch, not a Trainer flag

        def training_step(self, batch, batch_idx):
            x, y = batch  # (B/n, T) each: one micro-batch
            return lm_loss(self.model, x, y)  # Lightning divides by n when accumulating

        def configure_optimizers(self):
            return make_optimizer(self.model, TrainConfig())

    class Phases(pl.Callback):
        """The hand-written loop's phases, from the Trainer's hooks: `forward i.k`, `backward i.k`,
        `step i`, and `zero_grad i-1`, which Lightning runs between the first forward and the
        first backward of the next optimizer step (at step 0 there is nothing to zero). The same
        names give the same categories (the tracker calls what dies in its own phase a
        temporary) and the same synchronizations, so the step times compare."""

        def __init__(self):
            self.cm, self.step, self.micro = None, 0, 0

        def _enter(self, name):
            self._exit()
            self.cm = run.phase(name)
            self.cm.__enter__()

        def _exit(self):
            if self.cm is not None:
                cm, self.cm = self.cm, None
                cm.__exit__(None, None, None)

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.step, self.micro = divmod(batch_idx, n)
            self._enter(f"forward {self.step}.{self.micro}")

        def on_before_zero_grad(self, trainer, module, optimizer):
            if self.step > 0:  # the previous step's gradients go here
                self._enter(f"zero_grad {self.step - 1}")

        def on_before_backward(self, trainer, module, loss):
            self._enter(f"backward {self.step}.{self.micro}")

        def on_after_backward(self, trainer, module):
            self._exit()

        def on_before_optimizer_step(self, trainer, module, optimizer):
            self._enter(f"step {self.step}")

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self._exit()

    with run.phase("model", setup=True):
        module = LitLM()
    with run.phase("data", category="inputs", setup=True):
        micro = []
        for i in range(run.p.steps):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device)  # (B, T)
            micro += list(zip(x.chunk(n), y.chunk(n)))
    trainer = pl.Trainer(
        accelerator="gpu" if run.is_cuda else "cpu", devices=1,
        precision="bf16-mixed",  # torch.autocast(dtype=torch.bfloat16); "16-mixed" adds a GradScaler
        accumulate_grad_batches=n,  # n micro-batches per optimizer step
        max_steps=run.p.steps, callbacks=[Phases()],
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )
    loader = torch.utils.data.DataLoader(micro, batch_size=None)  # the micro-batches as they are
    # the DataLoader draws its base seed as a tensor and reads it (.item()); in sim that value is
    # a stand-in, and it sizes nothing
    with run.stand_in_values("Lightning's DataLoader reads its random base seed"):
        trainer.fit(module, loader)
    if run.simulated:
        run.note("sim: Lightning ran its CPU accelerator (fake tensors live on the CPU device); "
                 "its torch.cuda.empty_cache() calls reach sim's allocator model.")


def baseline(run):
    by_hand(run)


def lightning(run):
    with_lightning(run)
