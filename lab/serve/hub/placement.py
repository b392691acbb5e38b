"""Which lessons fit a GPU of a given size (a MIG slice, a small card), by the queue's own rule.

A hub's spawner gives each learner a whole GPU, a MIG slice or a share of a GPU. Which lessons
run there at seed scale is what the machine's runner admits: a variant's reference recording's
reserved peak + 5 % + 1 GiB (the CUDA context, fragmentation: lab/runner/peaks.py) must fit the
GPU's memory. A lesson with several ranks needs that many GPUs, which a single slice is not.

    python -m lab.serve.hub.placement 10GB      the Markdown list docs/WORKSHOPS.md shows

Headless: no Textual, no aiohttp, no torch.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from lab.report.units import format_bytes


@dataclass
class LessonFit:
    number: int
    lesson_id: str
    title: str
    fits: list[str] = field(default_factory=list)  # variants whose need fits the GPU
    too_big: list[tuple[str, int]] = field(default_factory=list)  # (variant, bytes needed)
    unrecorded: list[str] = field(default_factory=list)  # no reference recording: not known
    ranks: int = 1


def need_bytes(peak_reserved: int) -> int:
    """What the runner's admission asks of a GPU for a variant with this recorded peak."""
    from lab.runner.peaks import MARGIN_BYTES, MARGIN_FRACTION

    return int(peak_reserved * (1 + MARGIN_FRACTION)) + MARGIN_BYTES


def fits(gpu_bytes: int, reference: Path | None = None) -> list[LessonFit]:
    from lab.course.curriculum import load_course
    from lab.course.reference import REFERENCE_DIR
    from lab.runner.peaks import recorded_peak

    root = Path(reference or REFERENCE_DIR)
    out = []
    for lesson in load_course().lessons:
        fit = LessonFit(int(lesson.key), lesson.id, lesson.title,  # the number the app shows
                        ranks=lesson.ranks("seed", "cuda"))
        for variant in lesson.variants:
            peak = recorded_peak(lesson.id, variant.name, root)  # the runner's own reading
            if peak is None:
                fit.unrecorded.append(variant.name)
            elif need_bytes(peak) <= gpu_bytes:
                fit.fits.append(variant.name)
            else:
                fit.too_big.append((variant.name, need_bytes(peak)))
        out.append(fit)
    return sorted(out, key=lambda f: f.number)


def markdown(gpu_bytes: int, reference: Path | None = None) -> str:
    """The list, one line per lesson, grouped: all fit, some fit, none fit, not recorded."""
    groups: dict[str, list[str]] = {"all": [], "some": [], "none": [], "ranks": [],
                                    "unknown": []}
    for f in fits(gpu_bytes, reference):
        name = f"{f.number:02d} {f.lesson_id}"
        if f.ranks > 1:
            groups["ranks"].append(f"{name} ({f.ranks} ranks: {f.ranks} GPUs)")
        elif not f.fits and not f.too_big:
            groups["unknown"].append(name)
        elif not f.too_big:
            groups["all"].append(name)
        elif f.fits:
            most = max(b for _, b in f.too_big)
            n = len(f.too_big)
            others = "the other needs" if n == 1 else f"the other {n} need up to"
            groups["some"].append(f"{name}: {', '.join(f.fits)} ({others} {format_bytes(most)})")
        else:
            groups["none"].append(f"{name} (the smallest variant needs "
                                  f"{format_bytes(min(b for _, b in f.too_big))})")
    size = format_bytes(gpu_bytes)
    heads = {"all": f"Every variant fits {size}", "some": "Some variants fit",
             "none": "No variant fits (small scale, sim, or the recording)",
             "ranks": "Needs several GPUs", "unknown": "Not recorded yet (no need known)"}
    lines = []
    for key, items in groups.items():
        if items:
            lines.append(f"- **{heads[key]}**: " + "; ".join(items) + ".")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from lab.report.units import parse_size

    try:
        gpu_bytes = parse_size(argv[0] if argv else "")
    except ValueError as e:
        print(f"memlab placement: {e} (give a GPU's memory, e.g. 10GB)", file=sys.stderr)
        return 2
    print(markdown(int(gpu_bytes)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["LessonFit", "fits", "markdown", "need_bytes"]
