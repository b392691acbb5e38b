"""The learner's progress and run history, saved in the user data directory.

Where: `$MEMLAB_HOME/progress.jsonl` when `MEMLAB_HOME` is set (tests, workshops), else
platformdirs' user data dir for "memlab". The file is JSON Lines, one record per line:

    {"kind": "meta", "version": 1, "last_lesson": "linear-baseline"}
    {"kind": "lesson", "id": "linear-baseline", "runs": 2, "quiz": {"0": {...}}, ...}
    {"kind": "run", "lesson": "linear-baseline", "variant": "baseline", "peak_bytes": ..., ...}

Several processes of one learner (two browser tabs, a tab and a terminal) share the file: a
save takes a file lock (`progress.jsonl.lock`, filelock), reads the file again and merges this
process's changes into it (lab/progress_merge.py), so none of them loses another's progress.
Every save rewrites the whole file atomically (a temp file in the same folder, fsync, then
`os.replace`), so a crash mid-write leaves the previous file intact. A file damaged some other
way is recovered line by line: every record that parses is kept, the damaged original is kept
beside it as `progress.jsonl.corrupt`, and `Progress.recovered` says what happened.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab.progress_merge import State, merge

FILE_NAME = "progress.jsonl"
ENV_VAR = "MEMLAB_HOME"
VERSION = 1
HISTORY_LIMIT = 500  # run records kept; the oldest go first
LOCK_TIMEOUT_S = 30  # a save holds the lock for milliseconds; this only guards a stuck holder

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
        self._base = State()  # the file as this process last read or wrote it (for merging)

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
        state, bad = parse(text)
        prog._adopt(state)
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
        """Merge this process's changes into the file as it is now, under the file lock.

        Another process of the same learner (a second tab, a terminal) may have saved since
        this one read the file: its changes are kept (lab/progress_merge.py says how), and this
        object sees them afterwards."""
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT_S):
            try:
                disk, _ = parse(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                disk = State()
            mine = State(self.last_lesson, self.lessons, self.history)
            merged = merge(self._base, mine, disk, LessonProgress)
            merged.history = merged.history[-HISTORY_LIMIT:]
            records: list[dict[str, Any]] = [{"kind": "meta", "version": VERSION,
                                              "last_lesson": merged.last_lesson}]
            records += [lp.to_record() for lp in merged.lessons.values()]
            records += [r.to_record() for r in merged.history]
            atomic_write(self.path, "".join(json.dumps(r, separators=(",", ":")) + "\n"
                                            for r in records))
        self._adopt(merged)

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _adopt(self, state: State) -> None:
        """Take `state` as this process's view; lesson objects already held are updated in
        place (a screen may hold one)."""
        lessons = {}
        for lid, lp in state.lessons.items():
            held = self.lessons.get(lid)
            if held is not None and held is not lp:
                held.__dict__.update(lp.__dict__)
                lp = held
            lessons[lid] = lp
        self.last_lesson, self.lessons, self.history = state.last_lesson, lessons, state.history
        self._base = state.snapshot()

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


def parse(text: str) -> tuple[State, int]:
    """The records of a progress file, and how many lines could not be read."""
    state, bad = State(), 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            kind = rec.get("kind")
            if kind == "meta":
                last = rec.get("last_lesson")
                state.last_lesson = last if isinstance(last, str) else None
            elif kind == "lesson":
                lp = LessonProgress.from_record(rec)
                state.lessons[lp.id] = lp
            elif kind == "run":
                state.history.append(RunRecord.from_record(rec))
            else:
                raise ValueError(f"unknown record kind {kind!r}")
        except (ValueError, TypeError, KeyError, AttributeError):
            bad += 1
    return state, bad


def atomic_write(path: Path, data: str) -> None:
    """Write `data` to `path` so that a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
