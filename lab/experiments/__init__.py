"""Reusable workloads for the lessons: language-model layouts, data, train/eval steps, fit finder.

Headless like `lab.measure`: torch, numpy and transformers only (transformers is imported when a
model is built, not here).
"""

from .data import corpus_batch, corpus_tokens, lm_batch, random_batch
from .fit import Prediction, default_work, largest_batch, predict
from .models import LAYOUTS, Layout, build_model, count_params, layout, param_bytes, transformer_blocks
from .train import (TrainConfig, Workload, autocast, enable_checkpointing, eval_loss, get_batch,
                    lm_loss, make_optimizer, make_scaler, setup, train, train_step)

__all__ = [
    "LAYOUTS", "Layout", "Prediction", "TrainConfig", "Workload", "autocast", "build_model",
    "corpus_batch", "corpus_tokens", "count_params", "default_work", "enable_checkpointing",
    "eval_loss", "get_batch", "largest_batch", "layout", "lm_batch", "lm_loss", "make_optimizer",
    "make_scaler", "param_bytes", "predict", "random_batch", "setup", "train", "train_step",
    "transformer_blocks",
]
