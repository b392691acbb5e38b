"""Where a number came from, in words a learner reads next to it.

    provenance(result, recorded=True)  -> "recorded on an NVIDIA H200 (torch 2.11, transformers 5.17)"
    provenance(result)                 -> "your GPU (NVIDIA RTX 4090)" | "your CPU (small scale)"
                                          | "simulated (full scale, torch 2.13)"
    version_note(recordings, torch="2.13.0", transformers="4.57.1")
                                       -> one sentence when the versions differ, else None

Derived from a result's `mode`, `scale`, `device.name`, `torch_version` (and an optional
`transformers_version`), and from whether it was loaded from the recordings (assets/reference):
a result does not say by itself whether it was made on *this* machine, so the caller says
`recorded=True` for what it loaded from there. Duck-typed: anything shaped like a RunResult.
"""

from __future__ import annotations

import re
from typing import Iterable

from .units import format_bytes

SCALE_WORD = {"seed": "full", "small": "small"}  # seed = the sizes of the seed tutorials


def short_version(v: str | None) -> str:
    """'2.11.0+cu130' -> '2.11'; '5.17.1' -> '5.17'; '' -> ''."""
    m = re.match(r"\s*(\d+)\.(\d+)", v or "")
    return f"{m.group(1)}.{m.group(2)}" if m else (v or "").strip()


def with_article(name: str) -> str:
    """'an NVIDIA H200', 'an H100', 'a Tesla T4', 'a CUDA GPU'."""
    first, second = name[:1], name[1:2]
    vowel_sound = first.lower() in "aeiou" or (
        first in "FHLMNRSX" and (second.isupper() or second.isdigit()))
    return f"{'an' if vowel_sound else 'a'} {name}"


def _versions(result) -> str:
    torch = short_version(getattr(result, "torch_version", ""))
    tf = short_version(getattr(result, "transformers_version", "") or "")
    return ", ".join(x for x in (torch and f"torch {torch}", tf and f"transformers {tf}") if x)


def provenance(result, recorded: bool = False) -> str:
    """One label for where `result`'s numbers came from (see the module docstring)."""
    device = getattr(getattr(result, "device", None), "name", "") or "GPU"
    scale = getattr(result, "scale", "")
    if recorded:
        versions = _versions(result)
        return f"recorded on {with_article(device)}" + (f" ({versions})" if versions else "")
    mode = getattr(result, "mode", "")
    # a RunResult says what its mode means (lab.measure.modes); this layer never names modes
    if getattr(result, "on_gpu", False):
        return f"your GPU ({device})"
    if getattr(result, "simulated", False):
        parts = [f"{SCALE_WORD.get(scale, scale)} scale" if scale else "",
                 f"torch {short_version(getattr(result, 'torch_version', ''))}"
                 if getattr(result, "torch_version", "") else ""]
        inner = ", ".join(p for p in parts if p)
        return "simulated" + (f" ({inner})" if inner else "")
    if mode:  # a real run that is not on a GPU: this CPU
        return f"your CPU ({scale} scale)" if scale else "your CPU"
    return "unknown source"


def provenance_of(results: Iterable, recorded: bool = False) -> str:
    """The label shared by `results`, or each distinct label joined with '; '."""
    labels = list(dict.fromkeys(provenance(r, recorded) for r in results))
    return "; ".join(labels) if labels else ""


def version_note(recordings: Iterable, torch: str | None = None,
                 transformers: str | None = None) -> str | None:
    """One sentence when this machine's torch/transformers (major.minor) differ from the
    recordings'; None when they agree or nothing can be compared."""
    recs = list(recordings)
    if not recs:
        return None
    rec_torch = {short_version(getattr(r, "torch_version", "")) for r in recs} - {""}
    rec_tf = {short_version(getattr(r, "transformers_version", "") or "") for r in recs} - {""}
    mine_torch, mine_tf = short_version(torch), short_version(transformers)
    differs = []
    if mine_torch and rec_torch and rec_torch != {mine_torch}:
        differs.append(("torch", "/".join(sorted(rec_torch)), mine_torch))
    if mine_tf and rec_tf and rec_tf != {mine_tf}:
        differs.append(("transformers", "/".join(sorted(rec_tf)), mine_tf))
    if not differs:
        return None
    device = getattr(getattr(recs[0], "device", None), "name", "") or "GPU"
    theirs = " and ".join(f"{name} {rec}" for name, rec, _ in differs)
    mine = " and ".join(f"{name} {me}" for name, _, me in differs)
    return (f"The {device} recordings were made with {theirs}; this machine has {mine}. "
            "Some numbers can differ because of the versions, not the technique.")


__all__ = ["SCALE_WORD", "provenance", "provenance_of", "short_version", "version_note",
           "with_article"]


def allocator_line(a) -> str:
    """The allocator's peaks, saying whose: the GPU's CUDA allocator, or sim's model of it."""
    peaks = (f"peak allocated {format_bytes(a.peak_allocated_bytes)}, "
             f"peak reserved {format_bytes(a.peak_reserved_bytes)}")
    if getattr(a, "predicted", False):
        return f"CUDA allocator, predicted by sim's model of it: {peaks}"
    return f"CUDA allocator: {peaks}, nvidia-smi (NVML) {format_bytes(a.nvml_used_bytes)}"
