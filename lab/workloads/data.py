"""Batches: windows of the bundled corpus (bytes), random token ids, or random tensors.

Like nanoGPT's `get_batch`: the corpus is a numpy array of token ids, a batch is `batch` random
windows of `seq + 1` tokens, `x` the first `seq` and `y` the last `seq` (the next tokens).
Batches depend only on (seed, step), so two variants of a lesson see exactly the same data.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from lab.paths import ASSETS_DIR

CORPUS_DIR = ASSETS_DIR / "corpus"
CORPUS_FILE = CORPUS_DIR / "genesis-kjv.txt"


@lru_cache(maxsize=1)
def corpus_tokens() -> np.ndarray:
    """The bundled public-domain text as byte ids (uint8), ~200k tokens."""
    return np.frombuffer(CORPUS_FILE.read_bytes(), dtype=np.uint8)


def corpus_batch(batch: int, seq: int, step: int, device, seed: int = 0, split: str = "train"):
    """(x, y), each (B, T) int64: windows of the corpus; the last 10% is the eval split."""
    data = corpus_tokens()
    cut = int(len(data) * 0.9)
    data = data[:cut] if split == "train" else data[cut:]
    rng = np.random.default_rng([seed, step, 0 if split == "train" else 1])
    ix = rng.integers(0, len(data) - seq - 1, size=batch)
    x = np.stack([data[i : i + seq] for i in ix]).astype(np.int64)  # (B, T)
    y = np.stack([data[i + 1 : i + 1 + seq] for i in ix]).astype(np.int64)  # (B, T)
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def random_batch(batch: int, seq: int, vocab: int, step: int, device, seed: int = 0):
    """(x, y), each (B, T) int64: random token ids (seed scale: the bytes, not the words, matter)."""
    rng = np.random.default_rng([seed, step, 2])
    ids = rng.integers(0, vocab, size=(batch, seq + 1), dtype=np.int64)  # (B, T+1)
    return (torch.from_numpy(ids[:, :-1].copy()).to(device),
            torch.from_numpy(ids[:, 1:].copy()).to(device))


def lm_batch(layout, batch: int, seq: int, step: int, device, seed: int = 0, split: str = "train"):
    """The tiny layout reads the corpus; the big layouts get random ids of their vocabulary."""
    if layout.name == "tiny":
        return corpus_batch(batch, seq, step, device, seed, split)
    return random_batch(batch, seq, layout.vocab_size, step + (10_000 if split != "train" else 0),
                        device, seed)


def tensor_batch(x_shape: tuple[int, ...], y_shape: tuple[int, ...], device, dtype):
    """(x, y) of standard-normal values for the regression workloads (linear, mlp), drawn on
    `device` like a lesson does (`torch.randn(B, d_in, device=...)`); memory does not depend on
    the values, and the engine seeds PyTorch's generator before every run."""
    return (torch.randn(x_shape, device=device, dtype=dtype),
            torch.randn(y_shape, device=device, dtype=dtype))
