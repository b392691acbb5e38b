"""The learner's progress and run history, saved in the user data directory.

Where: `$MEMLAB_HOME/progress.jsonl` when `MEMLAB_HOME` is set (tests, workshops), else
platformdirs' user data dir for "memlab". The file is JSON Lines, one record per line:

    {"kind": "meta", "version": 1, "last_lesson": "linear-baseline"}
    {"kind": "lesson", "id": "linear-baseline", "runs": 2, "quiz": {"0": {...}}, ...}
    {"kind": "run", "lesson": "linear-baseline", "variant": "baseline", "peak_bytes": ..., ...}

Beside it, `results/<lesson-id>.json` keeps the last results shown for each lesson (full
`RunResult` dicts, or a pointer to a recording), so the Results tab survives a restart.

The learning loop's rules live here, not in the screens: a prediction is committed once and
never changed (one made after a result was on screen is kept but marked `late`, and does not
count in the calibration record); a quiz answer is final (no retry after the answer is shown).

Several processes of one learner (two browser tabs, a tab and a terminal) share the file: a
save takes a file lock (`progress.jsonl.lock`, filelock), reads the file again and merges this
process's changes into it (lab/course/progress_merge.py), so none of them loses another's progress.
Every save rewrites the whole file atomically (a temp file in the same folder, fsync, then
`os.replace`), so a crash mid-write leaves the previous file intact; the temp file such a crash
leaves behind is removed by the next save (under the lock, where no other save is mid-write).
Every read is bounded (lab/user_files.py): a progress file that is a FIFO or 1 GB is no file the
lab wrote, and is set aside (`.corrupt`) rather than read. A file damaged some other
way is recovered line by line: every record that parses is kept, the damaged original is kept
beside it as `progress.jsonl.corrupt`, and `Progress.recovered` says what happened. A value that
cannot be what the lab wrote (a prediction of `Infinity`, a count of "many") is dropped the same
way, field by field: the record keeps its other fields, names the dropped ones in `invalid`
(the class view shows them as invalid), and the original stays in `progress.jsonl.corrupt`.
Predictions go through `parse_prediction`, the lab's one number parser with the learning loop's
range, both when a learner types one and when one is read back.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab.atomic import atomic_write, remove_leftovers
from lab.course.progress_merge import State, merge
from lab.report.numbers import NumberError, parse_number
from lab.user_files import PROGRESS_LIMIT, RESULT_LIMIT, UserFileError, read_user_file

FILE_NAME = "progress.jsonl"
ENV_VAR = "MEMLAB_HOME"
VERSION = 1
HISTORY_LIMIT = 500  # run records kept; the oldest go first
LOCK_TIMEOUT_S = 30  # a save holds the lock for milliseconds; this only guards a stuck holder
LEFTOVER_AGE_S = 600  # a temp file this old beside a results file is a killed save's

NOT_STARTED, RUN, QUIZ_DONE, QUIZ_PASSED = "not started", "run", "quiz done", "quiz passed"
PREDICTED, SEEN = "predicted", "seen"  # a prediction committed; a recording played back
RESULTS_DIR = "results"
MAX_GB = 100_000  # a predicted peak beyond 100 TB is a typo, not a prediction
MAX_COUNT = 10**9  # runs, questions: more is a damaged file


def parse_prediction(value: Any) -> float:
    """A predicted peak in GB: what a learner typed ("4.4", "4,4", "4.4 GB") or a number read
    back from the file. Raises NumberError (one line: what was given, what is accepted)."""
    if isinstance(value, str):
        value = value.strip()
        value = value[:-2] if value.lower().endswith("gb") else value
    return float(parse_number(value, what="predicted peak", lo=0, hi=MAX_GB, unit="GB"))


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
    playbacks: int = 0  # H200 recordings (or an instructor's run) played back to the end
    quiz: dict[str, Answer] = field(default_factory=dict)  # question index (as str) -> answer
    quiz_total: int = 0  # questions the lesson had when last answered
    prediction_gb: float | None = None  # predicted peak, committed once
    last_run: str = ""
    prediction_at: str = ""  # when it was committed
    prediction_late: bool = False  # committed after a result was on screen: not calibration
    revealed_at: str = ""  # when a result (which holds the answer) was first shown
    truth_gb: float | None = None  # the peak the prediction is compared with
    truth_source: str = ""  # where that number came from ("H200 recording", "simulated", ...)
    # graded challenges of this lesson (lab/course/challenges.py): id -> {"passed": ever passed,
    # "last": the latest check, "peak_bytes", "status", "mode", "checked"}; merged key by key
    challenges: dict[str, dict] = field(default_factory=dict)
    # fields whose value on disk could not be what the lab wrote (dropped; never saved)
    invalid: tuple[str, ...] = field(default=(), compare=False)

    @property
    def quiz_answered(self) -> bool:
        return self.quiz_total > 0 and all(str(i) in self.quiz for i in range(self.quiz_total))

    @property
    def quiz_passed(self) -> bool:
        return self.quiz_answered and all(self.quiz[str(i)].correct for i in range(self.quiz_total))

    @property
    def quiz_score(self) -> tuple[int, int]:
        return sum(a.correct for a in self.quiz.values()), self.quiz_total

    @property
    def status(self) -> str:
        if self.quiz_passed:
            return QUIZ_PASSED
        if self.quiz_answered:
            return QUIZ_DONE
        if self.runs:
            return RUN
        if self.playbacks:
            return SEEN
        return PREDICTED if self.prediction_gb is not None else NOT_STARTED

    @property
    def calibration_error(self) -> float | None:
        """(prediction − truth) / truth, for a prediction committed before the answer was shown."""
        if self.prediction_gb is None or self.prediction_late or not self.truth_gb:
            return None
        return (self.prediction_gb - self.truth_gb) / self.truth_gb

    def to_record(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("invalid")
        return {"kind": "lesson", **d}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> LessonProgress:
        """A lesson record read back. A record without an id raises ValueError (the line is
        dropped); a field holding what the lab never writes is dropped alone (`invalid`)."""
        if not isinstance(d.get("id"), str):
            raise ValueError("lesson record without an id")
        invalid: list[str] = []

        def checked(key: str, parse, default):
            value = d.get(key)
            if value is None:
                return default
            try:
                return parse(value)
            except (NumberError, TypeError, ValueError):
                invalid.append(key)
                return default

        def count(value):
            return parse_number(value, what="a count", lo=0, hi=MAX_COUNT, integer=True)

        def text(value):
            if not isinstance(value, str):
                raise TypeError("not text")
            return value

        quiz = {}
        raw_challenges = d.get("challenges") or {}
        if not isinstance(raw_challenges, dict):
            invalid.append("challenges")
            raw_challenges = {}
        challenges = {str(k): dict(v) for k, v in raw_challenges.items() if isinstance(v, dict)}
        raw_quiz = d.get("quiz") or {}
        if not isinstance(raw_quiz, dict):
            invalid.append("quiz")
            raw_quiz = {}
        for k, v in raw_quiz.items():
            if not (k.isascii() and k.isdigit() and len(k) <= 4):  # a question's index
                invalid.append("quiz")
                continue
            answer = v.get("answer") if isinstance(v, dict) else None
            try:  # a choice's index or a predicted GB: a number the lab could have written
                answer = parse_number(answer, lo=0, hi=MAX_GB)
            except NumberError:
                invalid.append(f"quiz.{k}")
                continue
            quiz[str(k)] = Answer(answer, v.get("correct") is True)
        return cls(id=d["id"], runs=checked("runs", count, 0),
                   playbacks=checked("playbacks", count, 0), quiz=quiz,
                   quiz_total=checked("quiz_total", count, 0),
                   prediction_gb=checked("prediction_gb", parse_prediction, None),
                   last_run=checked("last_run", text, ""),
                   prediction_at=checked("prediction_at", text, ""),
                   prediction_late=d.get("prediction_late") is True,
                   revealed_at=checked("revealed_at", text, ""),
                   truth_gb=checked("truth_gb", parse_prediction, None),
                   truth_source=checked("truth_source", text, ""),
                   challenges=challenges, invalid=tuple(invalid))


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
        """A run record read back; ValueError (the line is dropped) for one the lab never wrote."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        rec = cls(**kw)
        texts = (rec.lesson, rec.variant, rec.mode, rec.scale, rec.status, rec.created)
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("bad run record")
        byte_count = dict(what="a byte count", lo=0, hi=2**63, integer=True)
        rec.peak_bytes = parse_number(rec.peak_bytes, **byte_count)
        if rec.gpu_memory is not None:
            rec.gpu_memory = parse_number(rec.gpu_memory, **byte_count)
        if rec.step_time_s is not None:
            rec.step_time_s = float(parse_number(rec.step_time_s, what="a step time", lo=0,
                                                 hi=1e9))
        if not isinstance(rec.by_category, dict):
            raise ValueError("bad run record")
        rec.by_category = {str(k): parse_number(v, **byte_count)
                           for k, v in rec.by_category.items()}
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
            raw = read_user_file(prog.path, PROGRESS_LIMIT)
        except UserFileError as e:
            if not e.missing:  # a FIFO, a folder, 1 GB: not a file the lab wrote
                prog.recovered = f"could not read {e}; starting fresh"
            return prog
        state, bad = parse(decoded(raw))
        prog._adopt(state)
        if bad:
            backup = prog.path.with_name(prog.path.name + ".corrupt")
            try:
                backup.write_bytes(raw)  # the original, byte for byte
            except OSError:
                backup = None
            kept = len(prog.lessons) + len(prog.history)
            values = [f"{lp.id}.{name}" for lp in prog.lessons.values() for name in lp.invalid]
            lines = bad - sum(bool(lp.invalid) for lp in prog.lessons.values())
            dropped = ([f"{lines} unreadable line(s)"] if lines else []) + (
                [f"{len(values)} invalid value(s) ({', '.join(values[:3])})"] if values else [])
            prog.recovered = (f"progress file was damaged: {' and '.join(dropped)} dropped, "
                              f"{kept} record(s) kept"
                              + (f"; the original is saved as {backup.name}" if backup else ""))
            prog.save()
        return prog

    def save(self) -> None:
        """Merge this process's changes into the file as it is now, under the file lock.

        Another process of the same learner (a second tab, a terminal) may have saved since
        this one read the file: its changes are kept (lab/course/progress_merge.py says how), and this
        object sees them afterwards."""
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT_S):
            remove_leftovers(self.path)  # temp files of saves killed mid-write (under the lock)
            try:
                disk, _ = parse(decoded(read_user_file(self.path, PROGRESS_LIMIT)))
            except UserFileError as e:
                disk = State()
                if not e.missing:  # no progress file the lab wrote (a FIFO, 1 GB): kept aside
                    _set_aside(self.path)
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

    def record_playback(self, lesson_id: str) -> None:
        """A recording of the lesson was played back to the end: the lesson counts as seen."""
        lp = self.lesson(lesson_id)
        lp.playbacks += 1
        self.last_lesson = lesson_id
        self.save()

    def record_answer(self, lesson_id: str, index: int, answer: Any, correct: bool,
                      total: int) -> bool:
        """Keep the first answer to a question; False (nothing saved) if it was answered."""
        lp = self.lesson(lesson_id)
        lp.quiz_total = total
        if str(index) in lp.quiz:
            return False
        lp.quiz[str(index)] = Answer(answer, bool(correct))
        self.save()
        return True

    def commit_prediction(self, lesson_id: str, gb: float) -> bool:
        """Commit the predicted peak once; False (nothing changed) if one was committed."""
        lp = self.lesson(lesson_id)
        if lp.prediction_gb is not None:
            return False
        lp.prediction_gb = parse_prediction(gb)  # NumberError: nothing is committed
        lp.prediction_at = _now()
        lp.prediction_late = bool(lp.revealed_at)
        self.save()
        return True

    def reveal(self, lesson_id: str, truth_gb: float | None = None, source: str = "") -> None:
        """A result holding the answer is on screen: from now on a prediction is late. The
        first truth seen for the predicted variant is what the calibration compares with."""
        lp = self.lesson(lesson_id)
        changed = False
        if not lp.revealed_at:
            lp.revealed_at, changed = _now(), True
        try:
            truth = None if truth_gb is None else parse_prediction(truth_gb)
        except NumberError:
            truth = None  # a measurement no prediction could be compared with
        if truth is not None and lp.truth_gb is None:
            lp.truth_gb, lp.truth_source, changed = truth, source, True
        if changed:
            self.save()

    def calibration(self) -> list[LessonProgress]:
        """Lessons with a prediction, in the order they were made."""
        made = [lp for lp in self.lessons.values() if lp.prediction_gb is not None]
        return sorted(made, key=lambda lp: lp.prediction_at)

    # ---- the last results shown, per lesson (a file each; atomic) ---------------------------
    def results_path(self, lesson_id: str) -> Path:
        return self.path.parent / RESULTS_DIR / f"{lesson_id}.json"

    def save_results(self, lesson_id: str, entries: list[dict[str, Any]]) -> None:
        """entries: {"how": "live", "result": RunResult.to_dict()} or {"how": "recording",
        "variant": name} (a recording is read again from the install, not copied)."""
        data = {"version": VERSION, "saved": _now(), "entries": entries}
        path = self.results_path(lesson_id)
        # no lock here: only temp files older than any write are a killed save's
        remove_leftovers(path, older_than_s=LEFTOVER_AGE_S)
        atomic_write(path, json.dumps(data, separators=(",", ":")))

    def load_results(self, lesson_id: str) -> tuple[str, list[dict[str, Any]]]:
        """(when they were saved, entries); ("", []) when none or unreadable."""
        try:
            data = json.loads(read_user_file(self.results_path(lesson_id), RESULT_LIMIT))
            entries = [e for e in data["entries"] if isinstance(e, dict)]
            return str(data.get("saved", "")), entries
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return "", []

    def reset(self) -> None:
        self.last_lesson = None
        self.lessons.clear()
        self.history.clear()
        self.save()
        folder = self.path.parent / RESULTS_DIR
        for f in folder.glob("*.json") if folder.is_dir() else []:
            try:
                f.unlink()
            except OSError:
                pass


def _set_aside(path: Path) -> None:
    try:
        os.replace(path, path.with_name(path.name + ".corrupt"))
    except OSError:
        pass


def decoded(raw: bytes) -> str:
    """A progress file's text; bytes that are not UTF-8 become U+FFFD, so the line holding
    them is dropped as unreadable (its neighbours are kept) rather than the whole file."""
    return raw.decode("utf-8", errors="replace")


def parse(text: str) -> tuple[State, int]:
    """The records of a progress file, and how many lines (or values: `invalid`) could not be
    read. Never raises: a damaged file is a file to recover, not a crash."""
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
                bad += bool(lp.invalid)
            elif kind == "run":
                state.history.append(RunRecord.from_record(rec))
            else:
                raise ValueError(f"unknown record kind {kind!r}")
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
            bad += 1  # (NumberError is a ValueError; RecursionError: JSON nested too deep)
    return state, bad
