"""`memlab dev check`: every lesson on disk, checked like code (rustlings' `dev check`).

`check(course)` returns a list of `Problem`s, empty when the course is sound. Rules, each named
in its problems so an author knows what to fix:

  course     the course and every lesson load (files, TOML, fields, variants, formulas)
  headings   lesson.md: a title, the parts before the results marker and after it
  variants   baseline first, at least two, each with a title, a description and a function
  scales     seed and small, with the same parameters
  checks     each check's phase is a phase the experiment (or the workload layer) marks
  quiz       at least two questions, each explained; a predict-the-peak question
  claims     every claim reads the same as the recording it names (lab/course/claims.py): the current
             H200 recording, a superseded one beside it (superseded/<date>/<lesson-id>/), or
             (source = "ground_truth") the H200 ground-truth case its variant names
  markup     no {{…}} markup survives rendering in any field a learner reads (title, summary,
             objectives, variants, quiz, lesson.md)
  text       every {{placeholder}} names a claim, {{def:…}} or {{quote:…}}; no measured number
             (B, kB, MB, GB, GiB, ms, s, %, ×) typed in lesson.md or the quiz outside them
  reveals    nothing shown before the run (text_before, quiz questions) is within 5 % of a
             predict-the-peak answer
  reference  every variant has an H200 recording (cuda, seed), or names a ground-truth case of
             the same loop that the ground truth holds (lab/course/ground_truth.py), or is marked
             pending, or runs only in modes without a GPU (`modes = ["sim"]`: simulated, so
             no recording, and no claim, may name it); no stray recordings
  cite       the <!-- h200 --> block is what `memlab dev cite` renders from the recordings
  requires   every optional package a lesson needs is an extra in pyproject.toml

Torch-free, like everything it reads.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lab.measure.modes import mode_info
from lab.course.claims import verify
from lab.course.ground_truth import GroundTruthError, find, ground_truth_file, lesson_runs, load_cases
from lab.course.curriculum import (PLACEHOLDER_RE, RESULTS_MARKER, Course, Lesson, leftover_markup,
                            load_course, predict_answer, split_markdown)
from lab.measure.result import RunResult
from lab.paths import SUPERSEDED_DIR
from lab.course.reference import REFERENCE_DIR

BEFORE_HEADINGS = ("## Why it matters", "## What to look for in the plot")
AFTER_HEADINGS = ("## What the measurement showed", "## Take-away")
REVEAL_TOLERANCE = 0.05
# a measured-looking number: digits with a unit of memory, time, percent or ratio, not part of
# a name such as "Qwen2-1.5B" (preceded by a letter or a dash) or an identifier
NUMBER_RE = re.compile(r"(?<![\w.\-−/])[+\-−]?\d[\d,]*(?:\.\d+)?\s?"
                       r"(?:(?:TB|GB|MB|kB|KB|TiB|GiB|MiB|KiB|B|bytes|ms|s|%)(?![\w])"
                       r"|×(?!\s*[\w({]))")  # "2.6×" is a ratio; "5,000 × 10,000" a product
CODE_RE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
H200_BLOCK_RE = re.compile(r"<!-- h200 -->.*?<!-- /h200 -->", re.S)


@dataclass(frozen=True)
class Problem:
    path: Path
    rule: str
    message: str
    line: int | None = None
    warning: bool = False  # reported, but does not fail the check (e.g. a pending recording)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {'warning: ' if self.warning else ''}{self.rule}: {self.message}"


def check(course: Course | None = None, reference_root: Path | str | None = None,
          pyproject: Path | None = None) -> list[Problem]:
    course = course if course is not None else load_course()
    root = Path(reference_root) if reference_root else REFERENCE_DIR
    problems = [Problem(e.path, "course", f"{e.field}: {e.message}" if e.field else e.message)
                for e in course.errors]
    extras = _extras(pyproject)
    for lesson in course.lessons:
        problems += check_lesson(lesson, root, extras)
    return problems


def check_lesson(lesson: Lesson, root: Path, extras: set[str] | None = None) -> list[Problem]:
    recordings = _recordings(lesson, root)
    out: list[Problem] = []
    for rule in (_headings, _variants, _scales, _checks, _quiz, _markup, _text):
        out += rule(lesson)
    out += _reference(lesson, root, recordings)
    out += _claims(lesson, recordings, root.parent / SUPERSEDED_DIR.name,
                   lesson_runs(lesson, root))
    out += _reveals(lesson, root)
    out += _cite(lesson, root)
    if extras is not None:
        out += [Problem(lesson.path / "lesson.toml", "requires",
                        f"{name!r} is not provided by any extra in pyproject.toml")
                for name in lesson.requires if _norm(name) not in extras]
    return out


# ---- structure ---------------------------------------------------------------------------------
def _headings(lesson: Lesson) -> list[Problem]:
    md_path = lesson.path / "lesson.md"
    text = lesson.markdown
    out = []
    if not text.startswith("# "):
        out.append(Problem(md_path, "headings", "must start with '# <title>'", 1))
    if RESULTS_MARKER not in text:
        out.append(Problem(md_path, "headings", f"no {RESULTS_MARKER} line: the text must say what "
                           "is read before the run and what after it"))
    before, after = split_markdown(text)
    for h in BEFORE_HEADINGS:
        if not re.search(rf"^{re.escape(h)}\s*$", before, re.M):
            out.append(Problem(md_path, "headings", f"missing {h!r} before {RESULTS_MARKER}"))
    for h in AFTER_HEADINGS:
        if not re.search(rf"^{re.escape(h)}\s*$", after, re.M):
            out.append(Problem(md_path, "headings", f"missing {h!r} after {RESULTS_MARKER}"))
    return out


def _variants(lesson: Lesson) -> list[Problem]:
    path = lesson.path / "lesson.toml"
    out = []
    if len(lesson.variants) < 2:
        out.append(Problem(path, "variants", "a lesson compares at least two variants"))
    for v in lesson.variants:
        if not v.title or not v.description:
            out.append(Problem(path, "variants", f"variant {v.name!r} needs a title and a description"))
    return out


def _scales(lesson: Lesson) -> list[Problem]:
    seed, small = set(lesson.scales.get("seed", {})), set(lesson.scales.get("small", {}))
    if seed != small:
        return [Problem(lesson.path / "lesson.toml", "scales",
                        f"seed and small define different parameters: {sorted(seed ^ small)}")]
    return []


def _marked_phases(lesson: Lesson) -> list[re.Pattern]:
    """Phase names `run.phase(...)` marks in the experiment and the shared workload code."""
    lab_dir = Path(__file__).resolve().parents[1]
    sources = [lesson.code] + [p.read_text(encoding="utf-8")
                               for p in sorted((lab_dir / "workloads").glob("*.py"))]
    pats = []
    for code in sources:
        for name in re.findall(r'\.phase\(\s*f?"([^"]+)"', code):
            pats.append(re.compile(re.sub(r"\\\{[^}]*\\\}", r"[\\w.]+", re.escape(name))))
    return pats


def _checks(lesson: Lesson) -> list[Problem]:
    from lab.workloads.phases import MODEL, parse_phase  # the library step's own phase names

    pats = _marked_phases(lesson)
    marked = lambda name: (name == MODEL or parse_phase(name) is not None  # noqa: E731
                           or any(p.fullmatch(name) for p in pats))
    return [Problem(lesson.path / "lesson.toml", "checks",
                    f"check {c['name']!r} names phase {c['phase']!r}, which no run.phase marks")
            for c in lesson.checks if not marked(c["phase"])]


def _quiz(lesson: Lesson) -> list[Problem]:
    path = lesson.path / "lesson.toml"
    out = []
    if len(lesson.quiz) < 2:
        out.append(Problem(path, "quiz", "a lesson ends with a quiz of at least two questions"))
    if not any(q.kind == "predict_peak" for q in lesson.quiz):
        out.append(Problem(path, "quiz", "no predict_peak question: the learner predicts before the run"))
    for i, q in enumerate(lesson.quiz):
        if not q.explain:
            out.append(Problem(path, "quiz", f"quiz[{i}] is not explained"))
        if q.kind == "choice" and len(set(q.choices)) != len(q.choices):
            out.append(Problem(path, "quiz", f"quiz[{i}] repeats a choice"))
    return out


# ---- text: placeholders and typed numbers -------------------------------------------------------
def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _scannable(text: str) -> str:
    """The text with code, generated blocks and placeholders blanked (positions kept)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    for rx in (H200_BLOCK_RE, CODE_RE, PLACEHOLDER_RE):
        text = rx.sub(blank, text)
    return text


def _markup(lesson: Lesson) -> list[Problem]:
    out = []
    for where, text in lesson.shown_texts():
        path = lesson.path / ("lesson.md" if where.startswith("lesson.md") else "lesson.toml")
        for snippet in leftover_markup(text):
            out.append(Problem(path, "markup", f"{where} shows unrendered markup: …{snippet}… "
                               "(write {{claim-id}}, {{def:…}} or {{quote:…}})"))
    return out


def _text(lesson: Lesson) -> list[Problem]:
    ids = {c.id for c in lesson.claims}
    sources = [(lesson.path / "lesson.md", lesson.markdown)]
    toml_path = lesson.path / "lesson.toml"
    sources += [(toml_path, text) for text in lesson.source_texts]  # as written, unrendered
    out = []
    for path, text in sources:
        is_md = path.name == "lesson.md"
        for m in PLACEHOLDER_RE.finditer(text):
            inner = m.group(1)
            kind, sep, _ = inner.partition(":")
            if not (sep and kind in ("def", "quote")) and inner not in ids:
                out.append(Problem(path, "text", f"{{{{{inner}}}}} names no claim in lesson.toml",
                                   _line_of(text, m.start()) if is_md else None))
        for m in NUMBER_RE.finditer(_scannable(text)):
            out.append(Problem(path, "text", f"{m.group(0).strip()!r} is typed, not measured: state it "
                               "as a claim ({{id}}) or mark a definition ({{def:…}})",
                               _line_of(text, m.start()) if is_md else None))
    return out


def _reveals(lesson: Lesson, root: Path) -> list[Problem]:
    answers = []
    for q in lesson.quiz:
        if q.kind == "predict_peak":
            try:
                answers.append(predict_answer(lesson, q, root)[0])
            except Exception:
                continue
    if not answers:
        return []
    shown = [("lesson.md before " + RESULTS_MARKER, lesson.text_before), ("summary", lesson.summary)]
    shown += [("quiz question", q.question) for q in lesson.quiz]
    shown += [("objective", o) for o in lesson.objectives]
    out = []
    for where, text in shown:
        for m in NUMBER_RE.finditer(CODE_RE.sub(" ", text)):
            gb = _as_gb(m.group(0))
            if gb is None:
                continue
            for a in answers:
                if a and abs(gb - a) <= REVEAL_TOLERANCE * a:
                    out.append(Problem(lesson.path / "lesson.md", "reveals",
                                       f"{where} shows {m.group(0).strip()!r}, within 5 % of the "
                                       f"predict-the-peak answer ({a:.2f} GB)"))
    return out


def _as_gb(text: str) -> float | None:
    from lab.course.claims import BYTE_UNITS, ClaimError, parse_value

    try:
        v = parse_value(text.replace(" ", " "))
    except ClaimError:
        return None
    return v.number * BYTE_UNITS[v.unit] / 1e9 if v.unit in BYTE_UNITS else None


# ---- recordings ----------------------------------------------------------------------------------
def _recordings(lesson: Lesson, root: Path) -> dict[str, RunResult]:
    out = {}
    folder = root / lesson.id
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out[path.stem] = RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as e:
            out[path.stem] = e  # type: ignore[assignment]
    return out


def _reference(lesson: Lesson, root: Path, recs: dict) -> list[Problem]:
    folder = root / lesson.id
    names = [v.name for v in lesson.variants]
    out = []
    truth = ground_truth_file(root)
    cases = load_cases(truth) if any(v.ground_truth for v in lesson.variants) else {}
    for name in names:
        r = recs.get(name)
        ref = lesson.variant(name).ground_truth
        if ref:  # the H200 ran the same loop as a ground-truth case: that backs it too
            try:
                find(ref, cases)
            except GroundTruthError as e:
                out.append(Problem(lesson.path / "lesson.toml", "reference",
                                   f"{name}: {e} ({truth})"))
        if not lesson.variant(name).recorded:  # simulated only: nothing to record it on
            if r is not None:
                out.append(Problem(folder / f"{name}.json", "reference",
                                   f"{name} runs in {', '.join(lesson.variant(name).modes)} only: "
                                   "a recording of it would never be read"))
            continue
        if name in lesson.pending:
            out.append(Problem(folder, "reference", f"{name}: H200 recording pending", warning=True))
            continue
        if r is None and ref:
            continue
        if r is None:
            out.append(Problem(folder / f"{name}.json", "reference",
                               "no H200 recording: record it (README) or list it in pending"))
        elif isinstance(r, Exception):
            out.append(Problem(folder / f"{name}.json", "reference", f"unreadable: {r}"))
        elif (r.lesson, r.variant, r.mode, r.scale) != (lesson.id, name, "cuda", "seed"):
            out.append(Problem(folder / f"{name}.json", "reference",
                               f"is {r.lesson}/{r.variant} {r.mode}/{r.scale}, not "
                               f"{lesson.id}/{name} cuda/seed"))
    for stem in recs:
        if stem not in names:
            out.append(Problem(folder / f"{stem}.json", "reference", "no such variant in lesson.toml"))
    return out


def _claims(lesson: Lesson, recs: dict, superseded_root: Path,
            truth: dict | None = None) -> list[Problem]:
    path = lesson.path / "lesson.toml"
    good = {k: v for k, v in recs.items() if isinstance(v, RunResult)}
    earlier: dict[str, dict[str, RunResult]] = {}  # date -> that recording's variants
    out = []
    for c in lesson.claims:
        if c.source == "ground_truth":  # the H200 case of the same loop; pending changes nothing
            problem = verify(c, truth or {})
            if problem:
                out.append(Problem(path, "claims", f"{c.id}: {problem}"))
            continue
        if c.superseded:
            if c.superseded not in earlier:
                found = _recordings(lesson, superseded_root / c.superseded)
                earlier[c.superseded] = {k: v for k, v in found.items() if isinstance(v, RunResult)}
            problem = verify(c, earlier[c.superseded])
            if problem:
                out.append(Problem(path, "claims", f"{c.id}: (superseded recording {c.superseded}, "
                                   f"{superseded_root.name}/{c.superseded}/{lesson.id}/) {problem}"))
            continue
        if not mode_info(c.mode).on_gpu:
            out.append(Problem(path, "claims", f"{c.id}: only the H200 recordings (mode cuda) back "
                               "stated numbers; sim/cpu directions go in `also`"))
            continue
        simulated = [v for v in (c.variant, c.relative_to)
                     if v in {x.name for x in lesson.variants} and not lesson.variant(v).recorded]
        if simulated:
            out.append(Problem(path, "claims", f"{c.id}: {', '.join(simulated)} is simulated only "
                               "(no H200 recording): the lab states no number of it"))
            continue
        if {c.variant, c.relative_to} & set(lesson.pending):
            out.append(Problem(path, "claims", f"{c.id}: not checked, recording pending", warning=True))
            continue
        problem = verify(c, good)
        if problem:
            out.append(Problem(path, "claims", f"{c.id}: {problem}"))
    return out


def _cite(lesson: Lesson, root: Path) -> list[Problem]:
    from lab.dev.cite import BLOCK_RE, load_results, render

    m = BLOCK_RE.search(lesson.markdown)
    if m is None:
        return [Problem(lesson.path / "lesson.md", "cite", "no <!-- h200 --> … <!-- /h200 --> block "
                        f"after {RESULTS_MARKER}")]
    if m.group(0) != render(lesson, load_results(lesson, root), lesson_runs(lesson, root)):
        return [Problem(lesson.path / "lesson.md", "cite",
                        "the H200 block differs from the recordings: run `memlab dev cite`",
                        _line_of(lesson.markdown, m.start()))]
    return []


# ---- packaging -------------------------------------------------------------------------------------
def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _extras(pyproject: Path | None) -> set[str] | None:
    """Distribution names offered by any extra, normalised; None when there is no pyproject
    (an installed wheel), so the rule is skipped there."""
    path = pyproject or Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not path.is_file():
        return None
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = set()
    for deps in data.get("project", {}).get("optional-dependencies", {}).values():
        for dep in deps:
            out.add(_norm(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0]))
    return out


__all__ = ["Problem", "check", "check_lesson"]
