"""Which torch and transformers versions sim's CUDA paths were checked on, and the notes a result
carries when this machine runs others.

Validated against H200 recordings made with torch 2.11 + transformers 5.17 (the device's
versions); the CPU build sim runs on here is torch 2.13. Other versions run, with a note.
"""

from __future__ import annotations

from importlib import metadata

import torch

VALIDATED_TORCH = ("2.11", "2.12", "2.13")  # H200 recordings: 2.11; this emulation's CPU build: 2.13
VALIDATED_TRANSFORMERS_MAJOR = "5"
# what the H200 recordings that judge sim ran (bench/sim_vs_h200.py); model code moves between
# minor versions: Qwen2's rotary embedding is a matmul in 5.17 and a multiply in 5.24, which moves
# the cuBLAS workspace's first allocation and with it lesson 16's reserved bytes by up to 5.5 %
RECORDED_TRANSFORMERS = "5.17"


def version_notes() -> list[str]:
    notes = []
    tv = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if tv not in VALIDATED_TORCH:
        notes.append(f"torch {torch.__version__}: the simulation's CUDA paths are validated for "
                     f"torch {', '.join(VALIDATED_TORCH)}; other versions may choose differently.")
    from .kernels.optim import CudaOptimDefaults

    if not CudaOptimDefaults.available():
        notes.append(f"torch {torch.__version__}: optimizers left at their default take the CPU's "
                     "per-parameter loop in sim, not the foreach implementation CUDA picks.")
    tf = transformers_version()
    if tf and not tf.startswith(VALIDATED_TRANSFORMERS_MAJOR + "."):
        notes.append(f"transformers {tf}: validated for transformers "
                     f"{VALIDATED_TRANSFORMERS_MAJOR}.x.")
    elif tf and ".".join(tf.split(".")[:2]) != RECORDED_TRANSFORMERS:
        notes.append(f"transformers {tf}: sim was checked against H200 runs with transformers "
                     f"{RECORDED_TRANSFORMERS}; model code differs between versions, which "
                     "leaves tensor bytes alike but can move the allocator's reserved bytes.")
    return notes


def transformers_version() -> str:
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return ""


__all__ = ["RECORDED_TRANSFORMERS", "VALIDATED_TORCH", "VALIDATED_TRANSFORMERS_MAJOR",
           "transformers_version", "version_notes"]
