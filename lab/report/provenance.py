"""Where a number came from, in words a learner reads next to it.

    provenance(result, recorded=True)  -> "recorded on an NVIDIA H200 (torch 2.11, transformers 5.17)"
    provenance(result)                 -> "your GPU (NVIDIA RTX 4090)" | "your CPU (small scale)"
                                          | "simulated (full scale, torch 2.13)"
    code_path_note(mine, recording)    -> one line (long, short, shortest) when the runs took
                                          other code paths (or, unnamed, other versions)

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


def card_name(device: str) -> str:
    """A card's name as a label carries it: 'NVIDIA H100 80GB HBM3' -> 'H100', 'NVIDIA
    A100-SXM4-80GB' -> 'A100', 'NVIDIA GeForce RTX 4090' -> 'GeForce RTX 4090'; '' -> 'GPU'.
    The memory size and the form factor go (provenance() says the whole name)."""
    name = re.sub(r"^(NVIDIA|Tesla)\s+", "", (device or "").strip())
    name = re.sub(r"[- ](SXM\d*|PCIe|NVL|\d+\s?GB)\b.*$", "", name)
    return name.strip() or "GPU"


def recorded_on(results: Iterable) -> str:
    """The card(s) `results` were recorded on, as labels name them: 'H200', 'H100', 'H200/H100'
    (a lesson recorded in two rounds); 'GPU' when none says."""
    cards = dict.fromkeys(card_name(getattr(getattr(r, "device", None), "name", ""))
                          for r in results)
    return "/".join(cards) or "GPU"


def short_label(result, recorded: bool = False) -> str:
    """The label a table header or a plot title carries: "H200 recording", "your GPU",
    "simulated (seed)", "your CPU (small)"."""
    if recorded:
        return f"{card_name(getattr(getattr(result, 'device', None), 'name', ''))} recording"
    scale = getattr(result, "scale", "")
    if getattr(result, "on_gpu", False):
        return "your GPU"
    where = "simulated" if getattr(result, "simulated", False) else "your CPU"
    return f"{where} ({scale})" if scale else where


def provenance_of(results: Iterable, recorded: bool = False) -> str:
    """The label shared by `results`, or each distinct label joined with '; '."""
    labels = list(dict.fromkeys(provenance(r, recorded) for r in results))
    return "; ".join(labels) if labels else ""


# ---- the version rule: one line per lesson, only when the code paths differ ----------------
# (used by the app, `memlab run` and exports alike)
# The engine names the code path a run took where versions choose one (RunResult.code_paths:
# the SDPA kernels, the optimizer's implementation, read from its op trace). Where a result does
# not carry them (recordings made before schema 2), the versions stand in.


def _paths(r) -> dict[str, str] | None:
    cp = getattr(r, "code_paths", None)
    if cp is None:
        return None
    return {"attention": "+".join(cp.attention), "optimizer": cp.optimizer}


def _minor(version: str) -> str:
    return ".".join((version or "").split("+")[0].split(".")[:2])


def code_path_note(mine: Iterable, recording: Iterable) -> tuple[str, ...] | None:
    """(long, …, short) forms of the one line saying where the learner's run and the recording took different code
    paths; None when they took the same ones (or there is nothing to compare)."""
    mine, recorded = list(mine), {r.variant: r for r in recording}
    pairs = [(r, recorded[r.variant]) for r in mine if r.variant in recorded]
    if not pairs:
        return None
    named = False
    differ: dict[str, set[str]] = {}
    peaks: dict[str, str] = {}
    for a, b in pairs:
        pa, pb = _paths(a), _paths(b)
        if pa is None or pb is None:
            continue
        named = True
        for what in pa:
            x, y = pa[what], pb[what]
            if x and y and x != y:
                differ.setdefault(f"{what} {x} (the recording: {y})", set()).add(a.variant)
                peaks[a.variant] = (f"{a.variant} {format_bytes(a.peak.bytes)} vs "
                                    f"{format_bytes(b.peak.bytes)} recorded")
    if named:
        if not differ:
            return None
        parts = [f"{what} in {', '.join(sorted(vs))}" for what, vs in differ.items()]
        parts.append("peaks " + ", ".join(peaks[v] for v in sorted(peaks)))
        long = "Your run took other code paths than the recording: " + "; ".join(parts) + "."
        short = "Other code paths than the recording: " + "; ".join(differ) + "."
        shortest = "Other paths than the recording: " + ", ".join(
            what.split(" ")[0] for what in differ)
        return long, short, shortest
    # fallback: the versions that choose those paths
    a, b = pairs[0]
    diffs = []
    for package, x, y in (("torch", a.torch_version, b.torch_version),
                          ("transformers", a.transformers_version, b.transformers_version)):
        if x and y and _minor(x) != _minor(y):
            diffs.append((package, _minor(x), _minor(y)))
    if not diffs:
        return None
    long = ("Versions: your run " + ", ".join(f"{p} {x}" for p, x, _ in diffs) + "; the recording "
            + ", ".join(f"{y}" for _, _, y in diffs) + ": the code paths (attention, optimizer) "
            "may differ.")
    short = (", ".join(f"{p} {x}" for p, x, _ in diffs) + " here; "
             + ", ".join(y for _, _, y in diffs) + " recorded: code paths may differ")
    shortest = (", ".join(f"{p} {x}" for p, x, _ in diffs) + " here; "
                + ", ".join(y for _, _, y in diffs) + " recorded: paths may differ")
    return long, short, shortest


__all__ = ["SCALE_WORD", "allocator_line", "card_name", "code_path_note", "provenance", "provenance_of",
           "recorded_on", "short_label", "short_version", "with_article"]


def allocator_line(a) -> str:
    """The allocator's peaks, saying whose: the GPU's CUDA allocator, or sim's model of it."""
    peaks = (f"peak allocated {format_bytes(a.peak_allocated_bytes)}, "
             f"peak reserved {format_bytes(a.peak_reserved_bytes)}")
    if getattr(a, "predicted", False):
        return f"CUDA allocator, predicted by sim's model of it: {peaks}"
    return f"CUDA allocator: {peaks}, nvidia-smi (NVML) {format_bytes(a.nvml_used_bytes)}"
