"""Recorded reference runs: `assets/reference/<lesson-id>/<variant>.json`.

Each file is one `RunResult.to_dict()` recorded on a real GPU (an H200, mode "cuda", scale
"seed"). On a machine without CUDA the lab shows them beside the learner's own run, labelled
as recorded. Missing folders, unreadable files and results of another schema are skipped:
a lesson without references simply has none.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.measure.result import RunResult
from lab.paths import REFERENCE_DIR
from lab.user_files import RESULT_LIMIT, read_user_file


def load_reference(lesson_id: str, root: Path | str | None = None) -> dict[str, RunResult]:
    """variant -> recorded RunResult, in file-name order; {} when nothing usable is there."""
    folder = Path(root if root is not None else REFERENCE_DIR) / lesson_id
    out: dict[str, RunResult] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        result = _read(path)
        if result is not None:
            out[result.variant or path.stem] = result
    return out


def load_recording(lesson_id: str, variant: str, root: Path | str | None = None) -> RunResult | None:
    """The one recording of `variant` (`<lesson-id>/<variant>.json`), or None (none, unreadable,
    another schema): what a run of one variant needs, without decoding its siblings."""
    return _read(Path(root if root is not None else REFERENCE_DIR) / lesson_id / f"{variant}.json")


def _read(path: Path) -> RunResult | None:
    try:
        # bounded: pushed runs live in a workshop folder, not only in the install
        return RunResult.from_dict(json.loads(read_user_file(path, RESULT_LIMIT)))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None  # a broken or newer-schema file: leave it out, keep the others


__all__ = ["REFERENCE_DIR", "load_recording", "load_reference"]
