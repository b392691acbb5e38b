"""The learner's progress and run history, saved in the user data directory.

Where: `$MEMLAB_HOME/progress.jsonl` when `MEMLAB_HOME` is set (tests, workshops), else
platformdirs' user data dir for "memlab". The file is JSON Lines, one record per line:

    {"kind": "meta", "version": 1, "last_lesson": "linear-baseline"}
    {"kind": "lesson", "id": "linear-baseline", "runs": 2, "quiz": {"0": {...}}, ...}
    {"kind": "run", "lesson": "linear-baseline", "variant": "baseline", "peak_bytes": ..., ...}

Every save rewrites the whole file atomically (a temp file in the same folder, fsync, then
`os.replace`), so a crash mid-write leaves the previous file intact. A file damaged some other
way is recovered line by line: every record that parses is kept, the damaged original is kept
beside it as `progress.jsonl.corrupt`, and `Progress.recovered` says what happened.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab.atomic import atomic_write

FILE_NAME = "progress.jsonl"
ENV_VAR = "MEMLAB_HOME"
VERSION = 1
HISTORY_LIMIT = 500  # run records kept; the oldest go first

NOT_STARTED, RUN, QUIZ_PASSED = "not started", "run", "quiz passed"


def data_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("memlab", appauthor=False))


def progress_path() -> Path:
    return data_dir() / FILE_NAME


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Answer:
    answer: Any  # choice index, or the predicted GB
    correct: bool


@dataclass
class LessonProgress:
    id: str
    runs: int = 0
    quiz: dict[str, Answer] = field(default_factory=dict)  # question index (as str) -> answer
    quiz_total: int = 0  # questions the lesson had when last answered
    prediction_gb: float | None = None  # predicted peak, made before running
    last_run: str = ""

    @property
    def quiz_passed(self) -> bool:
        return self.quiz_total > 0 and all(
            self.quiz.get(str(i)) is not None and self.quiz[str(i)].correct
            for i in range(self.quiz_total))

    @property
    def status(self) -> str:
        if self.quiz_passed:
            return QUIZ_PASSED
        return RUN if self.runs else NOT_STARTED

    def to_record(self) -> dict[str, Any]:
        d = asdict(self)
        return {"kind": "lesson", **d}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> LessonProgress:
        if not isinstance(d.get("id"), str):
            raise ValueError("lesson record without an id")
        quiz = {}
        for k, v in (d.get("quiz") or {}).items():
            quiz[str(k)] = Answer(v["answer"], bool(v["correct"]))
        pred = d.get("prediction_gb")
        return cls(id=d["id"], runs=int(d.get("runs", 0)), quiz=quiz,
                   quiz_total=int(d.get("quiz_total", 0)),
                   prediction_gb=None if pred is None else float(pred),
                   last_run=str(d.get("last_run", "")))


@dataclass
class RunRecord:
    """One variant run, small enough to keep hundreds: what today's run is compared with."""

    lesson: str
    variant: str
    mode: str
    scale: str
    status: str
    peak_bytes: int
    created: str
    step_time_s: float | None = None
    gpu_memory: int | None = None
    by_category: dict[str, int] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {"kind": "run", **asdict(self)}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> RunRecord:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        rec = cls(**kw)
        if not isinstance(rec.lesson, str) or not isinstance(rec.peak_bytes, int):
            raise ValueError("bad run record")
        return rec


class Progress:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else progress_path()
        self.last_lesson: str | None = None
        self.lessons: dict[str, LessonProgress] = {}
        self.history: list[RunRecord] = []
        self.recovered: str | None = None  # set when a damaged file was recovered

    # ---- load / save ----------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path | None = None) -> Progress:
        prog = cls(path)
        try:
            text = prog.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return prog
        except OSError as e:
            prog.recovered = f"could not read {prog.path}: {e}; starting fresh"
            return prog
        bad = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                kind = rec.get("kind")
                if kind == "meta":
                    last = rec.get("last_lesson")
                    prog.last_lesson = last if isinstance(last, str) else None
                elif kind == "lesson":
                    lp = LessonProgress.from_record(rec)
                    prog.lessons[lp.id] = lp
                elif kind == "run":
                    prog.history.append(RunRecord.from_record(rec))
                else:
                    raise ValueError(f"unknown record kind {kind!r}")
            except (ValueError, TypeError, KeyError, AttributeError):
                bad += 1
        if bad:
            backup = prog.path.with_name(prog.path.name + ".corrupt")
            try:
                backup.write_text(text, encoding="utf-8")
            except OSError:
                backup = None
            kept = len(prog.lessons) + len(prog.history)
            prog.recovered = (f"progress file was damaged: {bad} unreadable line(s) dropped, "
                              f"{kept} record(s) kept"
                              + (f"; the original is saved as {backup.name}" if backup else ""))
            prog.save()
        return prog

    def save(self) -> None:
        records: list[dict[str, Any]] = [{"kind": "meta", "version": VERSION,
                                          "last_lesson": self.last_lesson}]
        records += [lp.to_record() for lp in self.lessons.values()]
        records += [r.to_record() for r in self.history[-HISTORY_LIMIT:]]
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        atomic_write(self.path, data)

    # ---- queries --------------------------------------------------------------------------
    def lesson(self, lesson_id: str) -> LessonProgress:
        if lesson_id not in self.lessons:
            self.lessons[lesson_id] = LessonProgress(lesson_id)
        return self.lessons[lesson_id]

    def status(self, lesson_id: str) -> str:
        lp = self.lessons.get(lesson_id)
        return lp.status if lp else NOT_STARTED

    def history_for(self, lesson_id: str) -> list[RunRecord]:
        return [r for r in self.history if r.lesson == lesson_id]

    # ---- updates (each one saves) ---------------------------------------------------------
    def visit(self, lesson_id: str) -> None:
        self.last_lesson = lesson_id
        self.save()

    def record_run(self, result, gpu_memory: int | None = None) -> RunRecord:
        """Add a finished `RunResult` to the history; counts as a run of its lesson."""
        rec = RunRecord(lesson=result.lesson, variant=result.variant, mode=result.mode,
                        scale=result.scale, status=result.status, peak_bytes=int(result.peak.bytes),
                        created=result.created or _now(), step_time_s=result.step_time_s,
                        gpu_memory=gpu_memory, by_category=dict(result.peak.by_category))
        self.history.append(rec)
        del self.history[:-HISTORY_LIMIT]
        lp = self.lesson(result.lesson)
        lp.runs += 1
        lp.last_run = rec.created
        self.last_lesson = result.lesson
        self.save()
        return rec

    def record_answer(self, lesson_id: str, index: int, answer: Any, correct: bool,
                      total: int) -> None:
        lp = self.lesson(lesson_id)
        lp.quiz[str(index)] = Answer(answer, bool(correct))
        lp.quiz_total = total
        self.save()

    def set_prediction(self, lesson_id: str, gb: float | None) -> None:
        self.lesson(lesson_id).prediction_gb = gb
        self.save()

    def reset(self) -> None:
        self.last_lesson = None
        self.lessons.clear()
        self.history.clear()
        self.save()
