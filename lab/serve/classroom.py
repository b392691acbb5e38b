"""The class state of a workshop: runs the instructor pushed, and the lesson everyone is on.

The instructor runs a lesson once on the GPU and pushes it (`memlab class push 03`): every
served app shows that run as the lesson's result, after the learner's own prediction, so forty
learners do not queue forty runs. `memlab class goto 03` moves everyone to a lesson.

    <workshop>/class/state.json      {"seq": 7, "lesson": {"id": ..., "seq": 6, "at": ...},
                                      "pushes": {"<lesson-id>": {"seq": 5, "at": ..., "gpu": ...,
                                                                 "variants": [...], "mode": ...}}}
    <workshop>/class/runs/<lesson-id>/<variant>.json   the pushed RunResults

The runs folder has the layout of assets/reference, so the app plays a pushed run back through
the path that plays the H200 recordings (`load_reference(lesson_id, runs_dir)`). Served apps
poll `state.json` (a small file, read about once a second); `seq` grows with every change.
Writes are atomic, and two instructor commands at once are serialised by a file lock.

Headless: no Textual, no aiohttp.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from lab.course.progress import atomic_write
from lab.course.reference import load_reference
from lab.serve.workshop import checked_name
from lab.user_files import PROGRESS_LIMIT, read_user_file

CLASS_DIR = "class"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def instructor_label(result) -> str:
    """How a pushed run is labelled on a learner's screen."""
    device = getattr(getattr(result, "device", None), "name", "") or "the class GPU"
    if not getattr(result, "on_gpu", False):
        device = f"{device} ({result.mode}, {result.scale} scale)"
    return f"run by your instructor on {device}"


class Classroom:
    def __init__(self, workshop: Path | str):
        self.dir = Path(workshop) / CLASS_DIR
        self.state_path = self.dir / "state.json"
        self.runs_dir = self.dir / "runs"

    # ---- reading (the served apps, `memlab class`) -------------------------------------------
    def read(self) -> dict[str, Any]:
        """The class state; an empty one when there is none or it cannot be read."""
        try:
            state = json.loads(read_user_file(self.state_path, PROGRESS_LIMIT))
        except (OSError, ValueError, RecursionError):
            state = None
        if not isinstance(state, dict):
            return {"seq": 0, "lesson": None, "pushes": {}}
        # every served app polls this file: a value of the wrong type must not reach them
        if not isinstance(state.get("seq"), int) or isinstance(state.get("seq"), bool):
            state["seq"] = 0
        pushes = state.get("pushes")
        state["pushes"] = {k: v for k, v in pushes.items()
                           if isinstance(v, dict) and isinstance(v.get("seq", 0), int)
                           } if isinstance(pushes, dict) else {}
        lesson = state.get("lesson")
        if not (isinstance(lesson, dict) and isinstance(lesson.get("seq", 0), int)
                and isinstance(lesson.get("id", ""), str)):
            state["lesson"] = None
        return state

    def pushed(self, lesson_id: str) -> dict:
        """variant -> the pushed RunResult for a lesson ({} when none was pushed)."""
        pushes = self.read()["pushes"]
        if not isinstance(pushes, dict) or lesson_id not in pushes:
            return {}
        try:
            checked_name(lesson_id, "lesson id")
        except ValueError:
            return {}
        return load_reference(lesson_id, self.runs_dir)

    # ---- writing (the instructor) ------------------------------------------------------------
    def _change(self, edit) -> dict[str, Any]:
        from filelock import FileLock

        self.dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.dir / "state.lock"), timeout=30):
            state = self.read()
            state["seq"] = int(state.get("seq", 0)) + 1
            edit(state, state["seq"])
            atomic_write(self.state_path, json.dumps(state, indent=1))
        return state

    def push(self, results: Iterable) -> dict[str, Any]:
        """Push the runs of one lesson (RunResults): they replace what was pushed for it."""
        results = list(results)
        lessons = {r.lesson for r in results}
        if len(lessons) != 1:
            raise ValueError(f"push the runs of one lesson at a time (got {sorted(lessons)})")
        lesson_id = lessons.pop()
        # names from a file become file names: the learners' sanitiser says which may (no
        # '../', no '/', nothing hidden), before anything is removed or written
        checked_name(lesson_id, "lesson id")
        texts = {r.variant: json.dumps(r.to_dict()) for r in results}
        for variant in texts:
            checked_name(variant, "variant name")
        folder = self.runs_dir / lesson_id
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.json"):
            old.unlink()
        for variant, text in texts.items():
            atomic_write(folder / f"{variant}.json", text)
        first = results[0]

        def edit(state, seq):
            state["pushes"][lesson_id] = {
                "seq": seq, "at": _now(), "gpu": first.device.name, "mode": first.mode,
                "scale": first.scale, "variants": [r.variant for r in results],
                "label": instructor_label(first)}
        return self._change(edit)

    def goto(self, lesson_id: str) -> dict[str, Any]:
        """Move every served app to a lesson."""
        return self._change(lambda state, seq: state.__setitem__(
            "lesson", {"id": lesson_id, "seq": seq, "at": _now()}))

    def clear(self) -> dict[str, Any]:
        """Forget the pushed runs and the current lesson (learners' progress stays)."""
        for folder in self.runs_dir.glob("*") if self.runs_dir.is_dir() else []:
            for f in folder.glob("*.json"):
                f.unlink()

        def edit(state, seq):
            state["pushes"], state["lesson"] = {}, None
        return self._change(edit)


__all__ = ["CLASS_DIR", "Classroom", "instructor_label"]
