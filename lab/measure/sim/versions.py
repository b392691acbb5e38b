"""The notes a sim result carries when this machine runs other versions than sim was checked on.

The versions themselves are lab/measure/versions.py's one table: the range a run validated, and
what the H200 recordings that judge sim ran (torch 2.11 + transformers 5.17).
"""

from __future__ import annotations

import torch

from .. import versions as table
from ..versions import transformers_version


def version_notes(used: set[str] | None = None) -> list[str]:
    """The notes for torch, and for transformers when the run used it (`used`; None: say it
    whenever it applies)."""
    notes = []
    if not table.in_range("torch", torch.__version__) and not _passed_here("torch",
                                                                            torch.__version__):
        floor, top = table.validated_range("torch")
        notes.append(f"torch {torch.__version__}: the simulation's CUDA paths are validated for "
                     f"torch {floor}-{top}; other versions may choose differently.")
    from .kernels.optim import CudaOptimDefaults

    if not CudaOptimDefaults.available():
        notes.append(f"torch {torch.__version__}: optimizers left at their default take the CPU's "
                     "per-parameter loop in sim, not the foreach implementation CUDA picks.")
    tf = transformers_version()
    if not tf or (used is not None and "transformers" not in used):
        return notes
    floor, top = table.validated_range("transformers")
    if not table.in_range("transformers", tf) and not _passed_here("transformers", tf):
        notes.append(f"transformers {tf}: validated for transformers {floor}-{top}.")
    elif table.minor_of(tf) != table.recorded("transformers"):
        notes.append(f"transformers {tf}: sim was checked against H200 runs with transformers "
                     f"{table.recorded('transformers')}; model code differs between versions, "
                     "which leaves tensor bytes alike but can move the allocator's reserved bytes.")
    return notes


def _passed_here(name: str, version: str) -> bool:
    mine = table.validated_here(name, version)
    return bool(mine and mine.get("outcome") in table.PASSED)


__all__ = ["transformers_version", "version_notes"]
