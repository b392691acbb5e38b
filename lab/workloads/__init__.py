"""ONE workload and training layer for the lessons, the playground, `memlab compare` and `fit`.

    config      TrainConfig from a combination string (`bf16+ckpt+accum4`); TOKENS, the one
                table of what each token means                                    (torch-free)
    optim       the optimizer factory: TrainConfig -> OptimizerSpec -> torch.optim  (torch-free)
    registry    the workloads (linear, mlp, gpt2-tiny, gpt2-small, qwen2-1.5b), their default
                sizes and units; the LM layouts                                   (torch-free)
    phases      the phase vocabulary, 0-based: model, data 0, forward 0, step 0  (torch-free)
    fit         the one largest-batch search, probes injected                     (torch-free)
    tasks       LM / Linear / MLP: build a model, draw batches, compute the loss        (torch)
    models      the nn.Modules; LMs from transformers configs, random weights, no hub   (torch)
    data        corpus, token and tensor batches                                        (torch)
    train       setup, train_step, train, eval_step, evaluate                           (torch)
    experiment  the generic experiment file a worker runs for a workload                (torch)
    gpu         CUDA-only helpers the lessons use (allocator counters, settings, busy %)(torch)

Importing this package (and the torch-free modules) does not import torch, so the app and the
CLI list workloads and parse combinations instantly; lessons import the torch modules directly
(`from lab.workloads.train import train`). Never imports lab.playground, lab.runner or a UI.
"""

from .config import TOKENS, ComboError, Token, TrainConfig, parse_combo, parse_combos, tokens_help
from .optim import OptimizerSpec, optimizer_info, optimizer_spec
from .registry import (EXPERIMENT, LAYOUTS, VARIANT, Layout, Workload, all_workloads, get_workload,
                       layout, parse_sizes, register)

__all__ = ["EXPERIMENT", "LAYOUTS", "TOKENS", "VARIANT", "ComboError", "Layout", "OptimizerSpec",
           "Token", "TrainConfig", "Workload", "all_workloads", "get_workload", "layout",
           "optimizer_info", "optimizer_spec", "parse_combo", "parse_combos", "parse_sizes", "register",
           "tokens_help"]
