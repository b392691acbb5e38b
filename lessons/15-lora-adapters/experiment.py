"""Lesson 15: LoRA — what freezing the base weights saves, and what it does not.

The Qwen2-1.5B layout (random weights, fp32, dropout off), the course's training step
(lab.workloads.train.train_step: forward, backward, AdamW step, zero_grad) with AdamW(fused=True)
over the trainable parameters, `steps` steps:

  baseline        full fine-tune: every weight trains, so every weight has a gradient (4 B per
                  parameter) and AdamW's exp_avg + exp_avg_sq (8 B per parameter)
  lora            peft's LoRA (rank r on every linear layer of every block): the base weights
                  are frozen (requires_grad=False) and only the adapters' A (r, in) and
                  B (out, r) train; AdamW gets only the adapters
  lora_checkpoint the same with every block under torch.utils.checkpoint: the activations the
                  frozen layers still keep for backward are recomputed instead

A frozen weight needs no gradient and no optimizer state — but backward still has to reach the
adapters of layer 0 through layers 27..1, so every layer's activations are still saved.
"""

from contextlib import contextmanager, nullcontext
from dataclasses import replace

import torch

from lab.measure.torch_compat import parse_to
from lab.workloads import TrainConfig
from lab.workloads.data import lm_batch
from lab.workloads.models import build_model
from lab.workloads.registry import layout
from lab.workloads.train import enable_checkpointing, train_step

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def model_layout(run):
    p = run.p
    return replace(layout(p.layout), n_layer=p.layers, n_embd=p.hidden, d_ff=p.ff,
                   n_head=p.heads, n_kv_head=p.kv_heads, vocab_size=p.vocab)


@contextmanager
def no_op_moves_for_fake_parameters():
    """sim only: let `module.to(device, dtype)` return the module when nothing would change.

    peft moves each new adapter to its base layer's device and dtype with `.to()`. Real PyTorch
    turns a move that changes nothing into a no-op; with fake parameters `nn.Module._apply`
    always swaps the tensors, and the swap fails ("Couldn't swap Linear.weight"). The adapters
    are born on the right device in the right dtype here (see add_lora), so skipping the move
    changes no byte.
    """
    plain = torch.nn.Module.to

    def to(self, *args, **kwargs):
        device, dtype, _ = parse_to(*args, **kwargs)
        tensors = list(self.parameters()) + list(self.buffers())
        if all((device is None or t.device == device)
               and (dtype is None or not t.is_floating_point() or t.dtype == dtype)
               for t in tensors):
            return self
        return plain(self, *args, **kwargs)

    torch.nn.Module.to = to
    try:
        yield
    finally:
        torch.nn.Module.to = plain


def require_peft():
    try:
        import peft
    except ImportError:
        raise RuntimeError("needs peft, an optional extra: pip install 'memlab[peft]'") from None
    return peft


def add_lora(model, run):
    """Wrap every linear layer of every block in a LoRA adapter (peft); freezes the rest."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=run.p.rank, lora_alpha=2 * run.p.rank, lora_dropout=0.0,
                     target_modules=LORA_TARGETS, bias="none", task_type="CAUSAL_LM")
    # adapters are born on the model's device (no CPU copy first), in fp32 like the base
    moves = no_op_moves_for_fake_parameters() if run.simulated else nullcontext()
    with torch.device(run.device), moves:
        return get_peft_model(model, cfg)


def train_with(run, lora: bool, checkpointing: bool):
    if lora:
        require_peft()  # before building anything: say what is missing at once
    lay = model_layout(run)
    cfg = TrainConfig()  # fp32, set_to_none; the AdamW below is built here (trainable parameters only)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device)
        if checkpointing:
            enable_checkpointing(model, "blocks")
        if lora:
            model = add_lora(model, run)
        trainable = [p for p in model.parameters() if p.requires_grad]
        # fused: one kernel per step, no weight-sized temporaries (lesson 13), and its step
        # counters live beside the parameters, so the checks are exact in every mode
        opt = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.1, fused=True)
    n_all = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in trainable)
    run.metric("parameters", n_all)
    run.metric("trainable_parameters", n_train)
    run.metric("trainable_percent", 100 * n_train / n_all)
    losses = []
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device)
        losses.append(train_step(run, model, opt, None, x, y, cfg, i))
    run.metric("loss_first", run.item(losses[0]))


def baseline(run):
    train_with(run, lora=False, checkpointing=False)


def lora(run):
    train_with(run, lora=True, checkpointing=False)


def lora_checkpoint(run):
    train_with(run, lora=True, checkpointing=True)
