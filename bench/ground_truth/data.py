"""The tiny data the public scripts read, made where they run (deterministic, a few MB at most).

    nanoGPT              data/gt/train.bin, val.bin: uint16 token ids, uniform in [0, 50257)
    word_language_model  data/gt/{train,valid,test}.txt: lines of 20 words drawn from w0..w9999

Sizes matter to the memory only where a script keeps its data on the GPU (word_language_model
moves the whole corpus there): they are part of each case's definition.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

NANOGPT_TOKENS = {"train.bin": 200_000, "val.bin": 50_000}
WLM_WORDS = {"train.txt": 60_000, "valid.txt": 5_000, "test.txt": 5_000}
WLM_VOCAB = 10_000


def make_nanogpt(folder: Path) -> None:
    out = Path(folder) / "data" / "gt"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, n in NANOGPT_TOKENS.items():
        rng.integers(0, 50257, n, dtype=np.uint16).tofile(out / name)


def make_wlm(folder: Path) -> None:
    out = Path(folder) / "data" / "gt"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, n in WLM_WORDS.items():
        words = rng.integers(0, WLM_VOCAB, n)
        lines = [" ".join(f"w{w}" for w in words[i:i + 20]) for i in range(0, n, 20)]
        (out / name).write_text("\n".join(lines) + "\n")


MAKERS = {"nanoGPT": make_nanogpt, "word_language_model": make_wlm}
