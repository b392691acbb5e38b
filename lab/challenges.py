"""Graded challenges: the learner edits a copy of an experiment, sim checks it, progress keeps it.

A lesson may ship `challenges.toml` beside its lesson.toml (lessons/25-memory-budget has three):

    [[challenges]]
    id = "fit-16gib"
    title = "Fit this training step on a 16 GiB GPU without changing the batch"
    file = "challenges/fit_16gib.py"      # the starting code: `def challenge(run):`
    gpu_memory = "challenge_gpu"          # optional: the scale parameter that caps the GPU (bytes)
    start_variant = "fit_16gib_start"     # the lesson variant that runs the starting code
    solution_variant = "fit_16gib_solution"   # a reference solution, recorded on the H200
    hint = "..."
    [challenges.goal]                     # what a passing run shows, all of it:
    status = "ok"                         #   the run's status
    equal = { "phase:data 0:delta" = "batch * seq * 16" }   # quantity == formula (params)
    at_most = { "peak" = "0.5 * start" }  #   quantity <= formula; `start`: the starting code's
                                          #   value of that quantity, measured the same way

Quantities are lab.claims' (peak, category:<name>, phase:<name>:delta, metric:<name>, ...).

`start(ch)` copies the starting code into the learner's data folder (never over an existing copy:
`fresh=True` keeps the old one as a dated backup). `check(ch, runner)` runs the copy in sim, at
the lesson's seed scale, through the runner like any variant (a worker process: the learner's
code never runs in the app's process), runs the untouched starting code too when a goal needs
it (cached by its file's hash), grades the result and records it in progress. A served workshop
refuses all of it (`lab.serve.policy`): there learners' code is not run on the server.

Torch-free (loading, grading); the runner is injected.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab.claims import ClaimError, check_quantity_name, quantity
from lab.curriculum import Lesson
from lab.measure.formula import FormulaError, evaluate

FILE = "challenges.toml"
FOLDER = "challenges"  # in the learner's data folder
MODE = "sim"  # what a check runs: no GPU needed, allocator model included
SCALE = "seed"
SERVED_REFUSAL = ("Challenges run the code you write: they are off in a lab served to a browser, "
                  "where learners' code is not run on the server. Install memlab and run "
                  "`memlab challenge start ID` on your own machine.")


class ChallengeError(ValueError):
    """A broken challenges.toml, an unknown id, a copy not started: one line."""


@dataclass(frozen=True)
class Goal:
    status: str | None = "ok"
    equal: tuple[tuple[str, str], ...] = ()
    at_most: tuple[tuple[str, str], ...] = ()

    @property
    def needs_start(self) -> bool:
        return any("start" in f for _, f in self.equal + self.at_most)


@dataclass(frozen=True)
class Challenge:
    id: str
    title: str
    lesson: Lesson
    file: Path  # the starting code, in the lesson folder
    goal: Goal
    start_variant: str = ""
    solution_variant: str = ""
    gpu_memory_param: str = ""
    hint: str = ""

    @property
    def params(self) -> dict[str, Any]:
        return self.lesson.params(SCALE)

    @property
    def gpu_memory(self) -> int | None:
        return int(self.params[self.gpu_memory_param]) if self.gpu_memory_param else None

    @property
    def brief(self) -> str:
        """The starting file's docstring: what to do, in the challenge's own words."""
        import ast

        return ast.get_docstring(ast.parse(self.file.read_text(encoding="utf-8"))) or self.title


@dataclass
class GoalLine:
    text: str  # "peak 3.82 GB ≤ 21.39 GB (0.5 × start)"
    ok: bool


@dataclass
class Grade:
    challenge: str
    passed: bool
    lines: list[GoalLine] = field(default_factory=list)
    status: str = ""
    peak_bytes: int = 0
    error: str = ""
    used: tuple[str, ...] = ()  # the libraries the run used (torch, transformers): version notes

    def to_dict(self) -> dict[str, Any]:
        return {"challenge": self.challenge, "passed": self.passed, "status": self.status,
                "peak_bytes": self.peak_bytes, "error": self.error,
                "goals": [{"text": g.text, "ok": g.ok} for g in self.lines]}


# ---- loading (torch-free, no code run) -------------------------------------------------------------
def load_challenges(lesson: Lesson) -> list[Challenge]:
    path = lesson.path / FILE
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ChallengeError(f"{path}: invalid TOML: {e}") from None
    names = {v.name for v in lesson.variants}
    out = []
    for i, c in enumerate(data.get("challenges", [])):
        where = f"{path}: challenges[{i}]"
        for key in ("id", "title", "file"):
            if not isinstance(c.get(key), str) or not c[key]:
                raise ChallengeError(f"{where}.{key}: missing (a string)")
        file = lesson.path / c["file"]
        if not file.is_file():
            raise ChallengeError(f"{where}.file: no file {file}")
        for key in ("start_variant", "solution_variant"):
            if c.get(key) and c[key] not in names:
                raise ChallengeError(f"{where}.{key}: {c[key]!r} is not a variant of {lesson.id}")
        gp = c.get("gpu_memory", "")
        if gp and gp not in lesson.params(SCALE):
            raise ChallengeError(f"{where}.gpu_memory: {gp!r} is not a parameter of scales.{SCALE}")
        g = c.get("goal", {})
        goal = Goal(g.get("status", "ok"), tuple((k, str(v)) for k, v in g.get("equal", {}).items()),
                    tuple((k, str(v)) for k, v in g.get("at_most", {}).items()))
        if not goal.equal and not goal.at_most and not goal.status:
            raise ChallengeError(f"{where}.goal: say what passing means (status, equal, at_most)")
        for name, formula in goal.equal + goal.at_most:
            try:
                check_quantity_name(name)
            except ClaimError as e:
                raise ChallengeError(f"{where}.goal: {e}") from None
            try:
                evaluate(formula, {**lesson.params(SCALE), "start": 1.0})
            except FormulaError as e:
                raise ChallengeError(f"{where}.goal: {name} = {formula!r}: {e}") from None
        if goal.needs_start and not c.get("start_variant"):
            raise ChallengeError(f"{where}: a goal uses `start`, so name the start_variant")
        out.append(Challenge(c["id"], c["title"], lesson, file, goal, c.get("start_variant", ""),
                             c.get("solution_variant", ""), gp, c.get("hint", "")))
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ChallengeError(f"{path}: challenge ids must be unique")
    return out


def all_challenges(course) -> list[Challenge]:
    return [c for lesson in course.lessons for c in load_challenges(lesson)]


def find(course, cid: str) -> Challenge:
    chs = all_challenges(course)
    for c in chs:
        if c.id == cid:
            return c
    known = ", ".join(c.id for c in chs) or "none"
    raise ChallengeError(f"no challenge {cid!r}; the challenges are: {known}")


# ---- the learner's copy --------------------------------------------------------------------------
def workspace() -> Path:
    from lab.progress import data_dir

    return data_dir() / FOLDER


def copy_path(ch: Challenge) -> Path:
    return workspace() / f"{ch.id.replace('-', '_')}.py"


def refuse_if_served() -> None:
    from lab.serve.policy import Refused, served

    if served():
        raise Refused(SERVED_REFUSAL)


def start(ch: Challenge, fresh: bool = False) -> tuple[Path, bool]:
    """(the copy's path, whether a new copy was made). An existing copy is the learner's work:
    kept as it is, or with `fresh`, moved to a dated backup before the new copy."""
    refuse_if_served()
    dst = copy_path(ch)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        if not fresh:
            return dst, False
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        dst.rename(dst.with_name(f"{dst.stem}.{stamp}.bak.py"))
    tmp = dst.with_suffix(".tmp")
    shutil.copyfile(ch.file, tmp)
    tmp.replace(dst)
    return dst, True


# ---- grading -------------------------------------------------------------------------------------
def _fmt(name: str, v: float) -> str:
    if name in ("peak", "allocated", "reserved", "nvml") or name.startswith(("category:", "phase:")):
        return f"{v / 1e9:.2f} GB" if abs(v) >= 1e8 else f"{v:,.0f} B"
    return f"{v:g}"


def grade(ch: Challenge, result, start_result=None) -> Grade:
    """Is `result` (a RunResult) a solution? `start_result`: the starting code's, if a goal
    compares with it."""
    g = Grade(ch.id, True, status=result.status, peak_bytes=int(result.peak.bytes or 0),
              error=(result.error or "").splitlines()[0][:300] if result.error else "")
    if ch.goal.status:
        ok = result.status == ch.goal.status
        g.lines.append(GoalLine(f"status {result.status} (wanted {ch.goal.status})", ok))
    names = dict(ch.params)
    for kind, pairs in (("==", ch.goal.equal), ("≤", ch.goal.at_most)):
        for name, formula in pairs:
            got = quantity(result, name)
            scope = dict(names)
            if "start" in formula:
                base = quantity(start_result, name) if start_result is not None else None
                if base is None:
                    g.lines.append(GoalLine(f"{name}: the starting code has no value to compare with", False))
                    continue
                scope["start"] = float(base)
            want = float(evaluate(formula, scope))
            if got is None or isinstance(got, str):
                g.lines.append(GoalLine(f"{name}: not measured (the run {result.status})", False))
                continue
            got = float(got)
            ok = abs(got - want) <= 1e-9 * max(1.0, abs(want)) if kind == "==" else got <= want
            g.lines.append(GoalLine(f"{name} {_fmt(name, got)} {kind} {_fmt(name, want)} ({formula})", ok))
    g.passed = all(line.ok for line in g.lines)
    return g


def request(ch: Challenge, path: Path):
    from lab.runner.protocol import RunRequest

    return RunRequest(lesson_path=str(ch.lesson.path), variant="challenge", mode=MODE, scale=SCALE,
                      gpu_memory=ch.gpu_memory, timing=False, overrides=dict(ch.params),
                      timeout_s=ch.lesson.timeout_s, experiment=str(path))


def _start_result(ch: Challenge, runner, on_event):
    """The untouched starting code, run once per version of its file and kept in the workspace."""
    from lab.measure.result import RunResult

    digest = hashlib.sha256(ch.file.read_bytes()).hexdigest()[:16]
    cache = workspace() / f".{ch.id}.start-{digest}.json"
    if cache.is_file():
        try:
            return RunResult.from_dict(json.loads(cache.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    res = runner.run(request(ch, ch.file), on_event=on_event)
    if res.status in ("ok", "oom"):
        from lab.atomic import atomic_write

        atomic_write(cache, json.dumps(res.to_dict(), separators=(",", ":")))
    return res


def check(ch: Challenge, runner, progress=None, on_event=None) -> Grade:
    """Run the learner's copy in sim and grade it; the grade goes into `progress` (if given)."""
    refuse_if_served()
    path = copy_path(ch)
    if not path.is_file():
        raise ChallengeError(f"challenge {ch.id!r} is not started: `memlab challenge start {ch.id}` "
                             "copies its starting code for you to edit")
    result = runner.run(request(ch, path), on_event=on_event)
    start_result = _start_result(ch, runner, on_event) if ch.goal.needs_start else None
    g = grade(ch, result, start_result)
    g.used = tuple(sorted(getattr(result, "versions", None) or {}))
    if progress is not None:
        record(progress, ch, g)
    return g


# ---- progress ------------------------------------------------------------------------------------
def record(progress, ch: Challenge, g: Grade) -> None:
    """Kept on the lesson's record, key by key (lab.progress LessonProgress.challenges): `passed`
    once true stays true; `last` is the latest check."""
    lp = progress.lesson(ch.lesson.id)
    before = lp.challenges.get(ch.id, {})
    lp.challenges[ch.id] = {"passed": bool(before.get("passed")) or g.passed, "last": g.passed,
                            "peak_bytes": g.peak_bytes, "status": g.status, "mode": MODE,
                            "checked": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    progress.save()


def passed(progress, ch: Challenge) -> bool:
    lp = progress.lessons.get(ch.lesson.id)
    return bool(lp and lp.challenges.get(ch.id, {}).get("passed"))


def summary(progress, course) -> tuple[int, int]:
    """(challenges passed, challenges) for the course map."""
    chs = all_challenges(course)
    return sum(passed(progress, c) for c in chs), len(chs)


__all__ = ["Challenge", "ChallengeError", "Goal", "Grade", "all_challenges", "check", "copy_path",
           "find", "grade", "load_challenges", "passed", "record", "refuse_if_served", "start",
           "summary", "workspace"]
