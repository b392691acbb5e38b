"""Lessons as data: `lessons/course.toml` + `lessons/NN-slug/{lesson.toml, lesson.md, experiment.py}`.

Loading never imports torch or the experiment: variant functions are found with `ast`, formulas
are parsed, not run. A broken lesson becomes a `LessonError` naming the file and the field, and
the other lessons still load (`Course.errors`).

lesson.toml fields (see lessons/01-linear-baseline/lesson.toml for a full example):
  id, title, summary, objectives[]           what the lesson is
  modes = ["cuda", "cpu", "sim"]             which modes make sense (default: all three)
  timeout_s = 600                            per variant
  requires = ["pytorch_lightning"]           optional Python packages; missing -> lesson explains
  local_only = true                          off in a lab served to a browser (the lesson runs a
                                             training script as `memlab profile` does, and ends
                                             with the learner's own: lab.serve.policy)
  gpu = "exclusive"                          cuda runs get a GPU of their own (the lesson reads
                                             whole-GPU numbers: NVML memory, utilisation)
  [[variants]] name, title, description      the first one is "baseline"
               env = { NAME = "value" }      optional: environment variables the worker sets
                                             before torch is imported (e.g.
                                             PYTORCH_CUDA_ALLOC_CONF, read once per process)
               modes = ["sim"]               optional: the modes this variant runs in (default:
                                             the lesson's); one without the cuda of its
                                             lesson is simulated only, with no H200
                                             recording (`Variant.recorded`): dev check expects
                                             none, the app and `memlab run` say it is simulated
                                             and skip it in the other modes
               ground_truth = "hf/gpt2/fp32"  optional: the H200 ground-truth case that ran the
                                             same loop (lab.course.ground_truth); claims with
                                             source = "ground_truth" are checked against it
  [scales.seed] / [scales.small]             parameters (ints, floats, strings, bools);
                                             `gpu_memory` (bytes), if set, is the virtual GPU
                                             the lesson runs on unless --gpu-memory is given;
                                             `world_size` (>= 1), if set, is how many ranks of
                                             torch.distributed every variant runs on
                                             (`Lesson.ranks`; --gpus N changes it)
  [[checks]] name, phase, expected (may also use cuda_kernels: 1 on a GPU or in sim, 0 on the CPU),
             measure, variants, tolerance
                                             expected: formula over the scale's parameters;
                                             measure: "delta" | "peak" | "category:<name>";
                                             tolerance: how close a CUDA run must come
                                             (a fraction; default 0.01, tests/gpu)
  [[quiz]] kind = "choice":  question, choices[], answer (index), explain
           kind = "predict_peak": question, variant, scale, tolerance, explain; the answer is the
                                  variant's recorded H200 peak (answer_gb: an optional formula,
                                  used only while the recording is pending)
  [[claims]]                                 every measured number or direction the text, quiz or
                                             take-away states (see lab/course/claims.py); the text
                                             writes {{claim-id}}; {{def:512 B}} marks a
                                             definition and {{quote:...}} someone else's words
  pending = ["variant", ...] | true          recordings not made yet (new lessons, new variants)
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab import python_source
from lab.course.claims import Claim, ClaimError, claim_from_toml
from lab.decode import MALFORMED
from lab.measure.formula import FormulaError, names_in
from lab.measure.modes import MODES, SCALES, mode_info
from lab.paths import LESSONS_DIR
from lab.report.numbers import NumberError, parse_number

LESSONS_ENV = "MEMLAB_LESSONS_DIR"  # point the lab at another course folder (tests, authors)
FOLDER_RE = re.compile(r"^(\d\d)-([a-z0-9-]+)$")
MEASURES = re.compile(r"^(delta|peak|category:(parameters|gradients|optimizer_state|activations|"
                      r"temporaries|inputs|other))$")
LESSON_FILES = ("lesson.toml", "lesson.md", "experiment.py")
MAX_TIMEOUT_S = 7 * 24 * 3600  # timeout_s: a week is far beyond any lesson's variant


RESULTS_MARKER = "<!-- results -->"  # lesson.md: what follows it is shown after the run


PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


def render_placeholders(text: str, claims: dict[str, Claim]) -> str:
    """{{id}} -> the claim's stated value; {{def:x}} / {{quote:x}} -> x. Unknown ids stay visible
    (`memlab dev check` reports them)."""
    def one(m: re.Match) -> str:
        inner = m.group(1)
        kind, sep, rest = inner.partition(":")
        if sep and kind in ("def", "quote"):
            return rest.strip()
        claim = claims.get(inner)
        return claim.rendered() if claim else m.group(0)

    return PLACEHOLDER_RE.sub(one, text)


MARKUP_LEFT_RE = re.compile(r"\{\{|\}\}")


def leftover_markup(text: str) -> list[str]:
    """What of the {{…}} markup survived rendering (an unknown claim id, a typo such as
    `{{def 2 GB}}` or `{{def:2 GB}`), as the snippets a learner would see; [] when clean."""
    out = []
    for m in MARKUP_LEFT_RE.finditer(text):
        start, end = max(0, m.start() - 12), min(len(text), m.end() + 12)
        out.append(text[start:end].replace("\n", " "))
    return out


LESSON_REF_RE = re.compile(
    r"\b([Ll]essons?)(\s+)(\d{2})((?:\s*(?:,|\band\b|\bor\b|–|-|\bto\b)\s*\d{2}\b)*)\b")
_REF_SEP_RE = re.compile(r"(\s*(?:,|\band\b|\bor\b|–|-|\bto\b)\s*)")


def renumber_references(text: str, numbering: dict[int, int]) -> str:
    """"lesson 17", "lessons 08–10, 18 and 22": folder numbers, as authors write them, made the
    numbers a learner meets (`numbering`: folder -> place in the course). A range is expanded
    first and joined again only where the new numbers follow each other ("lessons 08–10" may
    become "lessons 08, 09 and 11"); a number of no lesson is left as written."""
    if not numbering or all(k == v for k, v in numbering.items()):
        return text

    def one(m: re.Match) -> str:
        word, space, first, rest = m.groups()
        pieces = _REF_SEP_RE.split(first + rest)
        numbers, seps = [int(x) for x in pieces[0::2]], pieces[1::2]
        wanted: list[int] = [numbers[0]]
        ranged = False
        for sep, n in zip(seps, numbers[1:]):
            if sep.strip() in ("–", "-", "to"):
                ranged = True
                wanted += list(range(wanted[-1] + 1, n + 1))
            else:
                wanted.append(n)
        if any(n not in numbering for n in wanted):
            return m.group(0)
        new = [numbering[n] for n in wanted]
        if len(new) == 1:
            return f"{word}{space}{new[0]:02d}"
        if ranged and new == list(range(new[0], new[0] + len(new))):
            dash = next(s.strip() for s in seps if s.strip() in ("–", "-", "to"))
            joint = f" {dash} " if dash == "to" else dash
            return f"{word}{space}{new[0]:02d}{joint}{new[-1]:02d}"
        last = next((s.strip() for s in reversed(seps) if s.strip() in ("and", "or")), "and")
        head = ", ".join(f"{n:02d}" for n in new[:-1])
        return f"{word}{space}{head} {last} {new[-1]:02d}"

    return LESSON_REF_RE.sub(one, text)


def split_markdown(text: str) -> tuple[str, str]:
    """(before, after) the results marker; without a marker everything is 'before'."""
    before, sep, after = text.partition(RESULTS_MARKER)
    return before.rstrip() + "\n", (after.strip() + "\n") if sep else ""


class CourseNotFound(LookupError):
    """No course folder at all (one line): a broken install, or a wrong MEMLAB_LESSONS_DIR."""


class LessonError(Exception):
    def __init__(self, path: Path | str, field: str, message: str):
        self.path, self.field, self.message = Path(path), field, message
        super().__init__(f"{self.path}: {field}: {message}" if field else f"{self.path}: {message}")


@dataclass(frozen=True)
class Variant:
    name: str
    title: str
    description: str = ""
    env: tuple[tuple[str, str], ...] = ()  # (NAME, value) pairs the worker sets before torch
    ground_truth: str = ""  # the ground-truth case of the same loop (lab.course.ground_truth), or ""
    modes: tuple[str, ...] = MODES  # the modes it runs in (lesson.toml's, else the lesson's)
    # False: its own `modes` leave out the GPU the lesson runs on: simulated only, no H200
    # recording (the lab had no GPUs to record it on, e.g. two H200s); dev check expects none
    recorded: bool = True

    def runs_in(self, mode: str) -> bool:
        return mode in self.modes

    def not_run_in(self, mode: str) -> str:
        """One line: why this variant does not run in `mode`."""
        simulated = "" if self.recorded else " (simulated, not recorded on the H200)"
        return f"{self.name} runs in {', '.join(self.modes)} only{simulated}, not in {mode}"


@dataclass(frozen=True)
class Question:
    kind: str  # "choice" | "predict_peak"
    question: str
    explain: str = ""
    choices: tuple[str, ...] = ()
    answer: int = 0
    variant: str = ""
    scale: str = ""
    answer_gb: str = ""
    tolerance: float = 0.1


@dataclass(frozen=True)
class Lesson:
    number: int
    slug: str  # folder name, "01-linear-baseline"
    id: str
    title: str
    summary: str
    objectives: tuple[str, ...]
    variants: tuple[Variant, ...]
    scales: dict[str, dict[str, Any]]
    checks: tuple[dict, ...]
    quiz: tuple[Question, ...]
    path: Path
    modes: tuple[str, ...] = MODES
    timeout_s: float = 600.0
    requires: tuple[str, ...] = ()
    claims: tuple[Claim, ...] = ()
    pending: tuple[str, ...] = ()  # variants whose H200 recording is not made yet
    local_only: bool = False  # off in a served lab (lab.serve.policy.lesson_refusal)
    # its number as the learner meets it (its place in the course map, from 1), and every
    # lesson's folder number -> that number: set by load_course (0, (): loaded on its own)
    seq: int = 0
    numbering: tuple[tuple[int, int], ...] = ()
    exclusive: bool = False  # gpu = "exclusive": cuda runs get a GPU of their own
    # lesson.toml's texts as written, before {{…}} is rendered (each quiz question with its
    # explanation and choices, the summary, the objectives): what `memlab dev check` reads
    source_texts: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The lesson's number as a learner reads it everywhere (the map, the header, `memlab
        list`, `memlab run N`): its place in the course; the folder's number outside a course."""
        return f"{(self.seq or self.number):02d}"

    def renumbered(self, text: str) -> str:
        """`text` with "lesson 17" written by an author (folder numbers) as the learner reads
        it ("lesson 18": its place in the course map)."""
        return renumber_references(text, dict(self.numbering))

    @property
    def markdown(self) -> str:
        return (self.path / "lesson.md").read_text(encoding="utf-8")

    @property
    def text_before(self) -> str:
        """What a learner reads before predicting and running: no measured answer in it."""
        return self.render(split_markdown(self.markdown)[0])

    @property
    def text_after(self) -> str:
        """The measured story (recorded-number blocks, take-away): shown after the run or replay."""
        return self.render(split_markdown(self.markdown)[1])

    def render(self, text: str) -> str:
        return self.renumbered(render_placeholders(text, {c.id: c for c in self.claims}))

    def shown_texts(self) -> list[tuple[str, str]]:
        """(field, rendered text) for every text of the lesson a learner reads, anywhere: the
        header and the palette (title, summary), the lesson tab, the controls, the quiz."""
        out = [("title", self.title), ("summary", self.summary)]
        out += [(f"objectives[{i}]", o) for i, o in enumerate(self.objectives)]
        for i, v in enumerate(self.variants):
            out += [(f"variants[{i}].title", v.title), (f"variants[{i}].description", v.description)]
        for i, q in enumerate(self.quiz):
            out += [(f"quiz[{i}].question", q.question), (f"quiz[{i}].explain", q.explain)]
            out += [(f"quiz[{i}].choices[{k}]", c) for k, c in enumerate(q.choices)]
        out += [("lesson.md", self.text_before), ("lesson.md (after the run)", self.text_after)]
        return out

    def claim(self, claim_id: str) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise KeyError(claim_id)

    @property
    def code(self) -> str:
        return (self.path / "experiment.py").read_text(encoding="utf-8")

    @property
    def experiment_path(self) -> Path:
        return self.path / "experiment.py"

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    def params(self, scale: str) -> dict[str, Any]:
        """The scale's parameters; a value "./NAME" names a file beside lesson.toml (a lesson's
        own model config) and becomes that file's path, wherever the run starts."""
        return {k: str(self.path / v[2:]) if isinstance(v, str) and v.startswith("./") else v
                for k, v in self.scales[scale].items()}

    def ranks(self, scale: str, mode: str, overrides: dict[str, Any] | None = None) -> int:
        """How many workers a run of this lesson starts (`RunRequest.ranks`): its `world_size`
        parameter on cuda and cpu (one process per rank, one GPU each on cuda), 1 in sim, which
        simulates the ranks in one process (lab/measure/distributed.py)."""
        n = int({**self.params(scale), **(overrides or {})}.get("world_size", 1))
        return 1 if mode_info(mode).ranks_in_one_process else n


@dataclass(frozen=True)
class Part:
    title: str
    short: str  # for the course map's narrow column
    lessons: tuple[str, ...]  # lesson ids, in teaching order


@dataclass
class Course:
    title: str
    intro: str
    lessons: list[Lesson] = field(default_factory=list)  # in teaching order (the parts')
    errors: list[LessonError] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    def part_of(self, lesson: Lesson) -> Part | None:
        return next((p for p in self.parts if lesson.id in p.lessons), None)

    def find(self, ref: str) -> Lesson:
        """By number as the course map shows it ("01", "1"), id ("linear-baseline") or folder
        ("01-linear-baseline")."""
        ref = str(ref).strip()
        number = lesson_number(ref)
        for lesson in self.lessons:
            if ref in (lesson.id, lesson.slug) or (number is not None and number == int(lesson.key)):
                return lesson
        if len(ref) > 80 or not ref.isprintable():
            raise LookupError(f"no lesson {_shown_ref(ref)}: give its number (e.g. 03), its id "
                              "or its folder (memlab list shows them)")
        broken = [e for e in self.errors if ref in e.path.parent.name or ref in str(e.path)]
        if broken:
            raise LookupError(f"lesson {ref!r} could not be loaded: {broken[0]}")
        known = ", ".join(f"{l.key} ({l.id})" for l in self.lessons) or "none"
        digits = ("; a lesson number is written in ASCII digits (03)"
                  if any(ch.isdigit() for ch in ref) and not ref.isascii() else "")
        raise LookupError(f"no lesson {ref!r}{digits}; known lessons: {known}")


def lesson_number(ref: str) -> int | None:
    """'03' or '3' -> 3; None for anything else. ASCII digits only, as everywhere the lab reads
    a number (lab.report.numbers): '٣' and '³' are not lesson numbers (str.isdigit() says yes
    to both, and int() reads the first and raises on the second)."""
    ref = str(ref).strip()
    if ref.isascii() and ref.isdigit() and len(ref) <= 6:
        return int(ref)
    return None


def _shown_ref(ref: str) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in ref)
    return repr(text if len(text) <= 40 else text[:37] + "…")


def load_course(root: Path | str | None = None) -> Course:
    """The course at `root`, $MEMLAB_LESSONS_DIR, or the installed one (lab.paths)."""
    root = Path(root or os.environ.get(LESSONS_ENV) or LESSONS_DIR)
    if not root.is_dir():  # loud: a course that silently has no lessons looks like a bug
        raise CourseNotFound(f"no course folder at {root}: reinstall memlab (its wheel ships "
                             f"lessons/ and assets/) or set {LESSONS_ENV} to a lessons folder")
    course_file = root / "course.toml"
    title, intro, errors, data = "GPU Memory Lab", "", [], {}
    if course_file.exists():
        try:
            data = tomllib.loads(course_file.read_text(encoding="utf-8"))
            title, intro = data.get("title", title), data.get("intro", "")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            errors.append(LessonError(course_file, "", f"invalid TOML: {_one_line(e)}"))
        if not (isinstance(title, str) and isinstance(intro, str)):
            errors.append(LessonError(course_file, "title", "title and intro must be strings"))
            title, intro = "GPU Memory Lab", ""
    course = Course(title, intro, errors=errors)
    parts = data.get("parts", [])
    for i, p in enumerate(parts if isinstance(parts, list) else [parts]):
        if not (isinstance(p, dict) and isinstance(p.get("title"), str)
                and isinstance(p.get("lessons"), list)
                and all(isinstance(lid, str) for lid in p["lessons"])
                and isinstance(p.get("short", ""), str)):
            errors.append(LessonError(course_file, f"parts[{i}]", "needs a title and a list of lessons"))
            continue
        course.parts.append(Part(p["title"], str(p.get("short", p["title"])), tuple(p["lessons"])))
    folders = []  # (number, id) of every lesson folder, loaded or not: each keeps its number
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        m = FOLDER_RE.match(folder.name)
        if not m:
            continue
        folders.append((int(m.group(1)), folder.name.split("-", 1)[-1]))
        try:
            course.lessons.append(load_lesson(folder))
        except LessonError as e:
            course.errors.append(e)
    ids = [l.id for l in course.lessons]
    for l in course.lessons:
        if ids.count(l.id) > 1:
            course.errors.append(LessonError(l.path / "lesson.toml", "id", f"{l.id!r} is used twice"))
    listed = [lid for part in course.parts for lid in part.lessons]
    for lid in listed:
        if lid not in ids:
            course.errors.append(LessonError(course_file, "parts", f"{lid!r} is no lesson's id"))
    # teaching order: the parts', then any lesson in no part, by number; each lesson's number
    # is its place in that order (the folders keep theirs: authors' cross-references use them,
    # and what a learner reads says the learner's numbers instead)
    # (a lesson that did not load keeps its place, so the others keep their numbers)
    rank = {lid: i for i, lid in enumerate(listed)}
    course.lessons.sort(key=lambda l: (rank.get(l.id, len(rank)), l.number))
    places = sorted(folders, key=lambda f: (rank.get(f[1], len(rank)), f[0]))
    numbering = {number: i for i, (number, _) in enumerate(places, 1)}
    course.lessons = [_numbered(l, numbering.get(l.number, 0), numbering) for l in course.lessons]
    return course


def _numbered(lesson: Lesson, seq: int, numbering: dict[int, int]) -> Lesson:
    """`lesson` at place `seq` of the course, its texts saying the learner's numbers."""
    lesson = replace(lesson, seq=seq, numbering=tuple(sorted(numbering.items())))
    say = lesson.renumbered
    return replace(
        lesson, title=say(lesson.title), summary=say(lesson.summary),
        objectives=tuple(say(o) for o in lesson.objectives),
        variants=tuple(replace(v, title=say(v.title), description=say(v.description))
                       for v in lesson.variants),
        quiz=tuple(replace(q, question=say(q.question), explain=say(q.explain),
                           choices=tuple(say(c) for c in q.choices)) for q in lesson.quiz))


def _req(data: dict, key: str, typ, path: Path, where: str = ""):
    name = f"{where}{key}"
    if key not in data:
        raise LessonError(path, name, "missing")
    value = data[key]
    if not isinstance(value, typ) or isinstance(value, bool) and typ is not bool:
        raise LessonError(path, name, f"must be {getattr(typ, '__name__', typ)}, got {type(value).__name__}")
    return value


def _strings(data: dict, key: str, path: Path, default=(), where: str | None = None) -> list[str]:
    value = data.get(key, default)
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise LessonError(path, where or key, "must be a list of strings")
    return list(value)


def experiment_functions(path: Path) -> set[str]:
    """Top-level function names in experiment.py, without importing it."""
    try:
        tree = python_source.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as e:
        raise LessonError(path, f"line {e.lineno}", f"syntax error: {e.msg}") from None
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 160 else text[:157] + "…"


def _number(data: dict, key: str, path: Path, default: float, **limits) -> float:
    """A number of lesson.toml, through the lab's one number parser (lab.report.numbers)."""
    try:
        return parse_number(data.get(key, default), what=key, **limits)
    except NumberError as e:
        raise LessonError(path, key, str(e).split(": ", 1)[1]) from None


def _bool(data: dict, key: str, path: Path) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise LessonError(path, key, f"{value!r}: use true or false")
    return value


def load_lesson(folder: Path) -> Lesson:
    """A lesson folder, or a LessonError naming the file and the field: a value of the wrong
    type anywhere (a table where a list belongs, text where a number does) is one line too,
    never an exception from deep inside the loader (every command loads every lesson)."""
    try:
        return _load_lesson(folder)
    except LessonError:
        raise
    except (*MALFORMED, UnicodeDecodeError, MemoryError) as e:
        where = "lesson.toml" if not isinstance(e, UnicodeDecodeError) else "a lesson file"
        raise LessonError(folder / "lesson.toml" if where == "lesson.toml" else folder, "",
                          f"malformed {where} ({type(e).__name__}: {_one_line(e)})") from None


def _load_lesson(folder: Path) -> Lesson:
    m = FOLDER_RE.match(folder.name)
    if not m:
        raise LessonError(folder, "", "folder name must look like NN-slug (e.g. 01-linear-baseline)")
    for name in LESSON_FILES:
        if not (folder / name).is_file():
            raise LessonError(folder / name, "", f"missing (a lesson needs {', '.join(LESSON_FILES)})")
    path = folder / "lesson.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise LessonError(path, "", f"invalid TOML: {e}") from None

    lesson_id = _req(data, "id", str, path)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", lesson_id):
        raise LessonError(path, "id", f"{lesson_id!r} must be lowercase letters, digits and dashes")
    title = _req(data, "title", str, path)
    summary = data.get("summary", "")
    if not isinstance(summary, str):
        raise LessonError(path, "summary", f"must be str, got {type(summary).__name__}")
    objectives = tuple(str(o) for o in _req(data, "objectives", list, path))
    modes = tuple(_strings(data, "modes", path, MODES))
    for mode in modes:
        if mode not in MODES:
            raise LessonError(path, "modes", f"{mode!r} is not one of {', '.join(MODES)}")

    variants_raw = _req(data, "variants", list, path)
    if not variants_raw:
        raise LessonError(path, "variants", "needs at least one variant")
    variants = []
    for i, v in enumerate(variants_raw):
        where = f"variants[{i}]."
        env = v.get("env", {})
        if not isinstance(env, dict) or not all(
                isinstance(k, str) and re.fullmatch(r"[A-Z_][A-Z0-9_]*", k) and isinstance(x, str)
                for k, x in env.items()):
            raise LessonError(path, where + "env", "a table of NAME = \"value\" strings")
        ground_truth = v.get("ground_truth", "")
        if ground_truth:
            from lab.course.ground_truth import GroundTruthError, parse_ref

            try:
                parse_ref(ground_truth)
            except GroundTruthError as e:
                raise LessonError(path, where + "ground_truth", str(e).split(": ", 1)[1]) from None
        variant_modes = tuple(_strings(v, "modes", path, modes, where + "modes"))
        for mode in variant_modes:
            if mode not in modes:
                raise LessonError(path, where + "modes",
                                  f"{mode!r} is not one of the lesson's modes ({', '.join(modes)})")
        if not variant_modes:
            raise LessonError(path, where + "modes", "needs at least one mode")
        variants.append(Variant(_req(v, "name", str, path, where), _req(v, "title", str, path, where),
                                str(v.get("description", "")), tuple(env.items()), ground_truth,
                                variant_modes, recorded=any(mode_info(m).on_gpu for m in variant_modes)
                                or not any(mode_info(m).on_gpu for m in modes)))
    names = [v.name for v in variants]
    if names[0] != "baseline":
        raise LessonError(path, "variants[0].name", f"the first variant must be 'baseline', got {names[0]!r}")
    if len(set(names)) != len(names):
        raise LessonError(path, "variants", "variant names must be unique")
    funcs = experiment_functions(folder / "experiment.py")
    for name in names:
        if name not in funcs:
            raise LessonError(folder / "experiment.py", name,
                              f"variant {name!r} has no function `def {name}(run):`")

    scales = _req(data, "scales", dict, path)
    for scale in SCALES:
        if scale not in scales or not isinstance(scales[scale], dict):
            raise LessonError(path, f"scales.{scale}", "missing (every lesson has seed and small)")
    for scale in scales:
        if scale not in SCALES:
            raise LessonError(path, f"scales.{scale}", f"unknown scale; use {', '.join(SCALES)}")

    for scale, params in scales.items():
        n = params.get("world_size", 1)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise LessonError(path, f"scales.{scale}.world_size", f"{n!r} must be a whole number >= 1")

    checks = []
    for i, c in enumerate(data.get("checks", [])):
        where = f"checks[{i}]."
        _req(c, "name", str, path, where)
        _req(c, "phase", str, path, where)
        if "expected" not in c:
            raise LessonError(path, where + "expected", "missing")
        measure = c.get("measure", "delta")
        if not MEASURES.match(measure):
            raise LessonError(path, where + "measure",
                              f"{measure!r}: use delta, peak or category:<category>")
        for v in c.get("variants", []):
            if v not in names:
                raise LessonError(path, where + "variants", f"{v!r} is not a variant of this lesson")
        _check_formula(c["expected"], scales, path, where + "expected")
        checks.append(dict(c))

    claims = []
    for i, c in enumerate(data.get("claims", [])):
        where = f"claims[{i}]."
        try:
            claim = claim_from_toml(c)
        except ClaimError as e:
            raise LessonError(path, where.rstrip("."), str(e)) from None
        for v in (claim.variant, claim.relative_to):
            if v is not None and v not in names:
                raise LessonError(path, where + "variant", f"{v!r} is not a variant of this lesson")
            if v is not None and claim.source == "ground_truth" and \
                    not variants[names.index(v)].ground_truth:
                raise LessonError(path, where + "source", f"variant {v!r} names no ground_truth "
                                  "case to check this claim against")
        if claim.id in {c.id for c in claims}:
            raise LessonError(path, where + "id", f"{claim.id!r} is used twice")
        claims.append(claim)
    by_id = {c.id: c for c in claims}

    if data.get("gpu", "shared") not in ("shared", "exclusive"):
        raise LessonError(path, "gpu", f"{data['gpu']!r}: use shared (the default) or exclusive")
    pending_raw = data.get("pending", ())
    pending = tuple(names) if pending_raw is True else tuple(pending_raw or ())
    for v in pending:
        if v not in names:
            raise LessonError(path, "pending", f"{v!r} is not a variant of this lesson")

    def rendered(text: str) -> str:
        return render_placeholders(text, by_id)

    quiz = []
    for i, q in enumerate(data.get("quiz", [])):
        where = f"quiz[{i}]."
        kind = _req(q, "kind", str, path, where)
        text = _req(q, "question", str, path, where)
        if kind == "choice":
            choices = tuple(_req(q, "choices", list, path, where))
            answer = _req(q, "answer", int, path, where)
            if len(choices) < 2:
                raise LessonError(path, where + "choices", "needs at least two choices")
            if not 0 <= answer < len(choices):
                raise LessonError(path, where + "answer", f"{answer} is not an index into choices (0..{len(choices) - 1})")
            quiz.append(Question(kind, rendered(text), rendered(q.get("explain", "")),
                                 tuple(rendered(c) for c in choices), answer))
        elif kind == "predict_peak":
            variant = _req(q, "variant", str, path, where)
            if variant not in names:
                raise LessonError(path, where + "variant", f"{variant!r} is not a variant of this lesson")
            scale = q.get("scale", "seed")
            if scale not in SCALES:
                raise LessonError(path, where + "scale", f"{scale!r}: use seed or small")
            answer_gb = str(q.get("answer_gb", ""))
            if answer_gb:
                _check_formula(answer_gb, {scale: scales[scale]}, path, where + "answer_gb")
            try:
                tol = parse_number(q.get("tolerance", 0.1), what="tolerance", lo=0, above=True,
                                   hi=1)
            except NumberError:
                tol = None
            if tol is None or tol == 1:
                raise LessonError(path, where + "tolerance",
                                  f"{q.get('tolerance')!r} must be a fraction between 0 and 1")
            quiz.append(Question(kind, rendered(text), rendered(q.get("explain", "")),
                                 variant=variant, scale=scale, answer_gb=answer_gb, tolerance=tol))
        else:
            raise LessonError(path, where + "kind", f"{kind!r}: use choice or predict_peak")

    # every text a learner reads goes through the one renderer, here, once: the app's header,
    # the palette, the served app, `memlab list` and the exports never see raw {{…}} markup
    variants = [replace(v, title=rendered(v.title), description=rendered(v.description))
                for v in variants]
    return Lesson(
        number=int(m.group(1)), slug=folder.name, id=lesson_id, title=rendered(title),
        summary=rendered(summary), objectives=tuple(rendered(o) for o in objectives),
        variants=tuple(variants), scales={k: dict(v) for k, v in scales.items()},
        checks=tuple(checks), quiz=tuple(quiz), path=folder, modes=modes,
        timeout_s=float(_number(data, "timeout_s", path, 600, lo=0, above=True, hi=MAX_TIMEOUT_S,
                                unit="s")),
        requires=tuple(_strings(data, "requires", path)),
        claims=tuple(claims), pending=pending, local_only=_bool(data, "local_only", path),
        exclusive=data.get("gpu", "shared") == "exclusive",
        source_texts=_source_texts(data),
    )


def _source_texts(data: dict) -> tuple[str, ...]:
    out = []
    for q in data.get("quiz", []):
        parts = [q.get("question", ""), q.get("explain", "")] + list(q.get("choices", []))
        out.append("\n".join(str(p) for p in parts))
    out.append(str(data.get("summary", "")))
    return (*out, *(str(o) for o in data.get("objectives", [])))


# names a check's formula may use besides the scale's parameters, set for each run
# (lab.measure.measure): 1 where CUDA's kernels run (a GPU, or sim taking CUDA's paths), 0 on the CPU
RUN_NAMES = {"cuda_kernels"}


def _check_formula(expr, scales: dict, path: Path, where: str) -> None:
    if isinstance(expr, (int, float)):
        return
    try:
        used = names_in(str(expr))
    except SyntaxError:
        raise LessonError(path, where, f"{expr!r} is not an arithmetic expression") from None
    for scale, params in scales.items():
        missing = used - set(params) - {"min", "max", "ceil"} - RUN_NAMES
        if missing:
            raise LessonError(path, where, f"uses {', '.join(sorted(missing))}, not in scales.{scale}")


def predicted_answer_gb(lesson: Lesson, q: Question, reference_root: Path | str | None = None) -> float:
    """The answer to a predict-the-peak question, in GB: the variant's recorded H200 peak
    (tracked tensors); without a recording, the max allocated of the ground-truth case the
    variant names (lab.course.ground_truth); else (pending) the question's formula."""
    return predict_answer(lesson, q, reference_root)[0]


def predict_answer(lesson: Lesson, q: Question,
                   reference_root: Path | str | None = None) -> tuple[float, str]:
    """(GB, where it came from): "recording" (the H200 run), "ground truth" (the H200 case of
    the same loop, seed scale) or "formula" (pending)."""
    from lab.course.reference import load_reference

    recorded = load_reference(lesson.id, reference_root).get(q.variant)
    if recorded is not None and recorded.peak.bytes and q.scale == recorded.scale:
        return recorded.peak.bytes / 1e9, "recording"
    truth = lesson.variant(q.variant).ground_truth if q.scale == "seed" else ""
    if truth:
        from lab.course.ground_truth import lesson_runs

        run = lesson_runs(lesson, reference_root).get(q.variant)
        if run is not None and run.max_allocated:
            return run.max_allocated / 1e9, "ground truth"
    if not q.answer_gb:
        raise LessonError(lesson.path / "lesson.toml", "quiz.variant",
                          f"no recording of {q.variant!r} and no answer_gb formula to fall back on")
    from lab.measure.formula import evaluate

    try:
        return float(evaluate(q.answer_gb, lesson.params(q.scale))), "formula"
    except FormulaError as e:
        raise LessonError(lesson.path / "lesson.toml", "quiz.answer_gb", str(e)) from None
