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
    at_least = { "category:gradients:max" = "1" }   # quantity >= formula

Quantities are lab.course.claims' (peak, reserved, largest, category:<name>:max, phase:<name>:delta, ...),
and only what the run MEASURED: the tracker's and the allocator model's numbers (peaks, bytes per
phase and category, the largest storages, the status). `metric:<name>` is refused in a goal: it
is what the submitted code reports about itself (`run.metric("sizes_ok", 1)` passed two
challenges once). A goal must also ask for more than a status, which doing nothing can meet.
Every field of challenges.toml is checked when it loads (one line, `ChallengeError`): an `id`
names the learner's copy, so it is a slug; `file` must be a .py file inside the lesson folder.

`start(ch)` copies the starting code into the learner's data folder (never over an existing copy:
`fresh=True` keeps the old one as a dated backup). `check(ch, runner)` runs the copy in sim, at
the lesson's seed scale, through the runner like any variant (a worker process: the learner's
code never runs in the app's process), runs the untouched starting code too when a goal needs
it, grades the result and records it in progress. The starting code's run is kept in the
workspace for the next check, signed (HMAC-SHA256, a key made once in the workspace, 0600) over
its bytes and the starting file's hash: a kept run that was edited, or belongs to another
version of the file, is run again, never graded against. docs/WORKSHOPS.md says what that does
and does not guard against. A served workshop refuses all of it (`lab.serve.policy`): there
learners' code is not run on the server.

Torch-free (loading, grading); the runner is injected.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab import python_source
from lab.course.claims import ClaimError, check_quantity_name, quantity
from lab.course.curriculum import Lesson
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
    at_least: tuple[tuple[str, str], ...] = ()

    @property
    def needs_start(self) -> bool:
        return any("start" in f for _, f in self.equal + self.at_most + self.at_least)


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

        try:
            tree = python_source.parse(self.file.read_text(encoding="utf-8"))
            return ast.get_docstring(tree) or self.title
        except (OSError, ValueError, SyntaxError, RecursionError):  # a file edited since loading
            return self.title


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
ID_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?")  # becomes a file name: no '/', no '..'
KEYS = {"id", "title", "file", "gpu_memory", "start_variant", "solution_variant", "hint", "goal"}
GOAL_KEYS = {"status": "a status (ok, oom)", "equal": "quantity = formula",
             "at_most": "quantity = formula", "at_least": "quantity = formula"}
STATUSES = ("ok", "oom", "error", "timeout")
# what the submission says about itself, not what the run measured: never a goal (a solution
# that only called run.metric("sizes_ok", 1) used to pass)
SELF_REPORTED = ("metric:",)
MAX_FILE_BYTES = 1 << 20  # challenges.toml and a starting file: a few KB


def _text(where: str, value: Any, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ChallengeError(f"{where}: {'missing: ' if value is None else ''}give a string "
                             f"(got {_shown(value)})")
    if len(value) > 2000 or any(not ch.isprintable() and ch not in "\n\t" for ch in value):
        raise ChallengeError(f"{where}: text of at most 2,000 printable characters")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "…"


def _starting_file(lesson: Lesson, where: str, rel: str) -> Path:
    """The starting code: a .py file inside the lesson folder (a challenges.toml is content:
    `file = "../../../etc/passwd"` must not become what `start` copies into the learner's
    folder)."""
    from lab.user_files import UserFileError, read_user_file

    folder = lesson.path.resolve()
    path = (folder / rel).resolve()
    if Path(rel).is_absolute() or not path.is_relative_to(folder) or path.suffix != ".py":
        raise ChallengeError(f"{where}: {_shown(rel)} must be a .py file inside the lesson "
                             f"folder (e.g. challenges/my_challenge.py)")
    try:
        read_user_file(path, MAX_FILE_BYTES).decode("utf-8")
    except (UserFileError, UnicodeDecodeError) as e:
        raise ChallengeError(f"{where}: {e if isinstance(e, UserFileError) else 'not UTF-8'}"
                             ) from None
    return path


def _goal(lesson: Lesson, where: str, g: Any, has_start: bool) -> Goal:
    if not isinstance(g, dict):
        raise ChallengeError(f"{where}: a table ([challenges.goal]) saying what passing means")
    unknown = sorted(set(g) - set(GOAL_KEYS))
    if unknown:
        raise ChallengeError(f"{where}.{unknown[0]}: not a goal key; use "
                             f"{', '.join(GOAL_KEYS)}")
    status = g.get("status", "ok")
    if status not in STATUSES:
        raise ChallengeError(f"{where}.status: {_shown(status)}; use {', '.join(STATUSES)}")
    pairs = {}
    for key in ("equal", "at_most", "at_least"):
        table = g.get(key, {})
        if not isinstance(table, dict):
            raise ChallengeError(f"{where}.{key}: a table of quantity = formula, e.g. "
                                 f'{key} = {{ "peak" = "0.5 * start" }} (got {_shown(table)})')
        out = []
        for name, formula in table.items():
            if isinstance(formula, bool) or not isinstance(formula, (str, int, float)):
                raise ChallengeError(f"{where}.{key}.{name}: a formula (text) or a number, "
                                     f"not {_shown(formula)}")
            formula = str(formula)
            try:
                check_quantity_name(name)
            except ClaimError as e:
                raise ChallengeError(f"{where}.{key}: {e}") from None
            if name.startswith(SELF_REPORTED):
                raise ChallengeError(f"{where}.{key}: {name!r} is what the submitted code reports "
                                     "about itself; a goal names what the run measured (peak, "
                                     "reserved, largest, category:<name>:max, phase:<name>:…)")
            try:
                evaluate(formula, {**lesson.params(SCALE), "start": 1.0})
            except FormulaError as e:
                raise ChallengeError(f"{where}.{key}: {name} = {formula!r}: {e}") from None
            if "start" in formula and not has_start:
                raise ChallengeError(f"{where}.{key}: {name} uses `start`, so name the "
                                     "start_variant")
            out.append((name, formula))
        pairs[key] = tuple(out)
    goal = Goal(status, pairs["equal"], pairs["at_most"], pairs["at_least"])
    if not (goal.equal or goal.at_most or goal.at_least):
        raise ChallengeError(f"{where}: say what the run must measure (equal, at_most, "
                             "at_least): a status alone can be met by doing nothing")
    return goal


def load_challenges(lesson: Lesson) -> list[Challenge]:
    """The lesson's challenges, every field checked; ChallengeError (one line) for the first
    thing wrong. Loading runs no code."""
    from lab.user_files import UserFileError, read_user_file

    path = lesson.path / FILE
    if not path.exists():
        return []
    try:
        data = tomllib.loads(read_user_file(path, MAX_FILE_BYTES).decode("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ChallengeError(f"{path}: invalid TOML: {e}") from None
    except (UserFileError, UnicodeDecodeError) as e:
        raise ChallengeError(f"{path}: {e if isinstance(e, UserFileError) else 'not UTF-8'}"
                             ) from None
    names = {v.name for v in lesson.variants}
    items = data.get("challenges", [])
    if not isinstance(items, list) or not all(isinstance(c, dict) for c in items):
        raise ChallengeError(f"{path}: challenges: a list of tables ([[challenges]])")
    out = []
    for i, c in enumerate(items):
        where = f"{path}: challenges[{i}]"
        unknown = sorted(set(c) - KEYS)
        if unknown:
            raise ChallengeError(f"{where}.{unknown[0]}: not a challenge key; use "
                                 f"{', '.join(sorted(KEYS))}")
        cid = _text(f"{where}.id", c.get("id"))
        if not ID_RE.fullmatch(cid):
            raise ChallengeError(f"{where}.id: {_shown(cid)}; an id is lowercase letters, digits "
                                 "and '-', at most 40 (it names the learner's copy)")
        title = _text(f"{where}.title", c.get("title"))
        file = _starting_file(lesson, f"{where}.file", _text(f"{where}.file", c.get("file")))
        variants = {}
        for key in ("start_variant", "solution_variant"):
            variants[key] = _text(f"{where}.{key}", c.get(key), required=False)
            if variants[key] and variants[key] not in names:
                raise ChallengeError(f"{where}.{key}: {variants[key]!r} is not a variant of "
                                     f"{lesson.id}")
        gp = _text(f"{where}.gpu_memory", c.get("gpu_memory"), required=False)
        if gp and not (isinstance(lesson.params(SCALE).get(gp), int)
                       and not isinstance(lesson.params(SCALE).get(gp), bool)
                       and lesson.params(SCALE)[gp] > 0):
            raise ChallengeError(f"{where}.gpu_memory: {gp!r} is not a parameter of scales.{SCALE} "
                                 "holding a size in bytes")
        goal = _goal(lesson, f"{where}.goal", c.get("goal", {}), bool(variants["start_variant"]))
        out.append(Challenge(cid, title, lesson, file, goal, variants["start_variant"],
                             variants["solution_variant"], gp,
                             _text(f"{where}.hint", c.get("hint"), required=False)))
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
    from lab.course.progress import data_dir

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
    if name in ("peak", "allocated", "reserved", "nvml", "largest") or name.startswith(("category:", "phase:")):
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
    for kind, pairs in (("==", ch.goal.equal), ("≤", ch.goal.at_most), ("≥", ch.goal.at_least)):
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
                g.lines.append(GoalLine(f"{name}: the run measured none (it ended {result.status})",
                                        False))
                continue
            got = float(got)
            ok = (abs(got - want) <= 1e-9 * max(1.0, abs(want)) if kind == "==" else
                  got <= want if kind == "≤" else got >= want)
            g.lines.append(GoalLine(f"{name} {_fmt(name, got)} {kind} {_fmt(name, want)} ({formula})", ok))
    g.passed = all(line.ok for line in g.lines)
    return g


def request(ch: Challenge, path: Path):
    from lab.runner.protocol import RunRequest

    return RunRequest(ch.lesson.id, "challenge", MODE, SCALE, kind="experiment",
                      experiment=str(path), params=dict(ch.params), gpu_memory=ch.gpu_memory,
                      timing=False, timeout_s=ch.lesson.timeout_s)


KEY_FILE = ".start-key"  # in the workspace: signs the kept runs of the starting code
SIGNATURE = "sig"


def _start_key() -> bytes:
    from lab.serve.identity import load_or_create_secret

    return load_or_create_secret(workspace(), KEY_FILE)


def _signed(key: bytes, digest: str, body: bytes) -> str:
    return hmac.new(key, digest.encode() + b"\0" + body, hashlib.sha256).hexdigest()


def _kept_start(cache: Path, key: bytes, digest: str):
    """The kept run of the starting code, when its signature holds; else None (run it again)."""
    from lab.decode import DecodeError, loads, result_from_dict
    from lab.user_files import RESULT_LIMIT, UserFileError, read_user_file

    try:
        raw = read_user_file(cache, RESULT_LIMIT)
        sig, _, body = raw.partition(b"\n")
        if not hmac.compare_digest(sig.decode("ascii", "replace"), _signed(key, digest, body)):
            return None
        return result_from_dict(loads(body))
    except (UserFileError, DecodeError):
        return None


def _start_result(ch: Challenge, runner, on_event):
    """The untouched starting code's run: kept in the workspace, signed, per version of its file.

    The kept file is `<signature>\n<result JSON>`: what `grade` compares with must be what the
    starting code measured, not a number someone typed into a JSON file."""
    digest = hashlib.sha256(ch.file.read_bytes()).hexdigest()
    cache = workspace() / f".{ch.id}.start-{digest[:16]}.json"
    key = _start_key()
    kept = _kept_start(cache, key, digest)
    if kept is not None:
        return kept
    res = runner.run(request(ch, ch.file), on_event=on_event)
    if res.status in ("ok", "oom"):
        from lab.atomic import atomic_write

        body = json.dumps(res.to_dict(), separators=(",", ":")).encode()
        atomic_write(cache, _signed(key, digest, body).encode() + b"\n" + body)
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
    """Kept on the lesson's record, key by key (lab.course.progress LessonProgress.challenges): `passed`
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
