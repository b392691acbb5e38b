"""Validate the installed torch and transformers by running the lab on them (`memlab doctor
--validate`): every lesson variant that runs in sim, at seed scale, plus the sim goldens' plain
Hugging Face loop, compared with the numbers the same code gave on the versions CI pins.

Sim is deterministic, so a library release either leaves every number equal to the byte or
moves some; what moved, and by how much, is the answer to "is this release safe here?":

    same       every variant's numbers equal the baseline's (tracked peak, phases, categories,
               checks, allocator peaks: a digest of the sim goldens' fields, lab.dev.goldens)
    within     some moved, none by more than the bars sim is held to against the H200
               (docs/SIMULATION.md: tracked peak 1 %, allocated 2 %, reserved 5 %; status equal)
    moved      "lesson 16 variant math by +5.50 % (reserved)": past a bar

A move is laid at a library's door when that library's version differs from the baseline's; a
variant that builds no transformers model cannot have been moved by transformers. The baseline
(validation_baseline.json beside this file, shipped in the wheel) is written by `memlab dev
versions --baseline` on the pinned versions; the outcome goes to the user's record
(lab.measure.versions) and, through `memlab dev versions --add`, into the project's table.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import platform
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from lab.measure import versions as V

BASELINE_PATH = Path(__file__).with_name("validation_baseline.json")
FORMAT = 1
# the bars of docs/SIMULATION.md (sim against the H200), in %: a move within them keeps every
# claim the lab makes about sim's accuracy; status must not change at all
TOLERANCE = {"peak": 1.0, "allocated": 2.0, "reserved": 5.0}
NEEDS = "needs "  # a status: the variant imports an optional package not installed there


@dataclass(frozen=True)
class Case:
    """One run: a lesson variant in sim at seed scale, or a golden's plain loop."""

    name: str  # "mixed-precision/bf16", "plain-hf-loop/gpt2-fp32-b8"
    label: str  # what the learner calls it: "lesson 08 variant bf16"
    entry: object  # lab.dev.goldens.Entry | PlainEntry


@dataclass
class Numbers:
    status: str
    peak: int
    allocated: int | None
    reserved: int | None
    sha256: str  # of every golden field (lab.dev.goldens.result_fields / plain_fields)
    transformers: bool  # the run built a transformers model
    seconds: float = 0.0

    def key(self) -> dict:
        """What the baseline keeps (no time)."""
        d = asdict(self)
        d.pop("seconds")
        return d


@dataclass
class Move:
    case: str
    label: str
    what: str  # "peak" | "allocated" | "reserved" | "status" | "details"
    percent: float | None  # None for status and details
    before: object
    after: object

    @property
    def within(self) -> bool:
        if self.what == "details":
            return True  # peaks equal; a phase's or category's bytes moved
        return self.percent is not None and abs(self.percent) <= TOLERANCE[self.what]

    def text(self) -> str:
        if self.what == "status":
            return f"{self.label}: status {self.before} -> {self.after}"
        if self.what == "details":
            return f"{self.label}: peaks equal, phases or categories differ"
        return f"{self.label} by {self.percent:+.2f} % ({self.what})"


@dataclass
class Verdict:
    library: str
    version: str
    baseline_version: str
    outcome: str  # same | within | moved | baseline (the version the baseline was made with)
    summary: str
    moves: list[Move] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.library} {self.version}: {self.summary}"


# ---- what runs -------------------------------------------------------------------------------
def cases(course=None) -> list[Case]:
    """Every variant of every lesson that runs in sim, in course order, then the goldens'
    plain loops. (A variant that needs a package not installed here says so: `needs X`.)"""
    from lab.course.curriculum import load_course
    from lab.dev.goldens import SUBSET, Entry, PlainEntry, sim_mode

    course = course or load_course()
    sim = sim_mode()  # the simulated mode's name, from the one mode rule
    out = []
    for lesson in course.lessons:
        if sim not in lesson.modes:
            continue
        for v in lesson.variants:
            if v.runs_in(sim):
                out.append(Case(f"{lesson.id}/{v.name}", f"lesson {lesson.key} variant {v.name}",
                                Entry(lesson.id, v.name, why="")))
    for e in SUBSET:
        if isinstance(e, PlainEntry):
            out.append(Case(e.name, f"memlab fit's loop {e.variant}", e))
    return out


def digest(fields: dict) -> str:
    """Of a golden's fields, as the baseline keeps them (a golden file's "sim" digests alike)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def run_case(case: Case) -> Numbers:
    """One case in this process, as the sim goldens run it (the worker's steps)."""
    from lab.dev.goldens import PlainEntry, run_entry

    t0 = time.perf_counter()
    quiet = io.StringIO()  # what a lesson prints (its own log lines) is not this report's
    with V.libraries_used() as used, warnings.catch_warnings(), \
            contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        warnings.simplefilter("ignore")  # nor are a library's deprecation notes
        fields = run_entry(case.entry)
    digest_ = digest(fields)
    alloc = fields.get("allocator") or {}
    peak = fields["peak"]["bytes"]
    # a variant whose optional extra is not installed says so ("pip install 'memlab[peft]'")
    missing = re.search(r"pip install '(memlab\[[\w-]+\])'|No module named '([\w.]+)'",
                        fields.get("error") or "")
    status = f"{NEEDS}{missing.group(1) or missing.group(2)}" if fields["status"] == "error" \
        and missing else fields["status"]
    return Numbers(status=status, peak=peak,
                   allocated=alloc.get("peak_allocated_bytes"),
                   reserved=alloc.get("peak_reserved_bytes"), sha256=digest_,
                   transformers="transformers" in used or isinstance(case.entry, PlainEntry),
                   seconds=round(time.perf_counter() - t0, 2))


def run_all(on_case: Callable[[int, int, Case, Numbers | None], None] | None = None,
            only: list[str] | None = None) -> dict[str, Numbers]:
    """Every case (or those named in `only`), in order; `on_case(i, n, case, numbers)` before
    (numbers None) and after each."""
    todo = [c for c in cases() if not only or c.name in only]
    out = {}
    for i, c in enumerate(todo):
        if on_case:
            on_case(i, len(todo), c, None)
        out[c.name] = run_case(c)
        if on_case:
            on_case(i, len(todo), c, out[c.name])
    return out


def installed_versions() -> dict[str, str]:
    """torch, transformers (package metadata) and Python: what a verdict is about."""
    out = {name: V.installed(name) or "" for name in V.LIBRARIES}
    out["python"] = platform.python_version()
    return out


# ---- the baseline ----------------------------------------------------------------------------
def load_baseline(path: Path = BASELINE_PATH) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def baseline_document(rows: dict[str, Numbers], made_with: dict[str, str]) -> dict:
    return {"about": "sim's numbers for every lesson variant at seed scale on the versions CI "
                     "pins: what `memlab doctor --validate` compares a release with. Written by "
                     "`memlab dev versions --baseline`, never by hand "
                     "(CONTRIBUTING.md#versions-and-the-suites-time).",
            "format": FORMAT, "made_with": made_with,
            "cases": {name: n.key() for name, n in rows.items()}}


# ---- comparing -------------------------------------------------------------------------------
def _pct(after, before) -> float | None:
    if not before or after is None:
        return None if before or after else 0.0
    return 100.0 * (after - before) / before


def moves(baseline: dict, rows: dict[str, Numbers], labels: dict[str, str]) -> list[Move]:
    """Every number that differs from the baseline's, per case."""
    out = []
    for name, n in rows.items():
        b = baseline["cases"].get(name)
        if b is None or b["sha256"] == n.sha256 or NEEDS in (b["status"][:6], n.status[:6]):
            continue  # not in the baseline, equal, or an optional package missing on one side
        label = labels.get(name, name)
        if b["status"] != n.status:
            out.append(Move(name, label, "status", None, b["status"], n.status))
            continue
        found = False
        for what in ("peak", "allocated", "reserved"):
            if b[what] != getattr(n, what):
                p = _pct(getattr(n, what), b[what])
                out.append(Move(name, label, what, p, b[what], getattr(n, what)))
                found = True
        if not found:
            out.append(Move(name, label, "details", None, None, None))
    return out


def _base(v: str) -> str:
    return (v or "").split("+")[0]


def verdicts(baseline: dict, rows: dict[str, Numbers], labels: dict[str, str],
             here: dict[str, str]) -> tuple[list[Verdict], list[str]]:
    """(one verdict per library, lines about moves no library explains)."""
    made = baseline["made_with"]
    changed = [lib for lib in V.LIBRARIES if _base(here.get(lib, "")) != _base(made.get(lib, ""))]
    all_moves = moves(baseline, rows, labels)
    uses_tf = {name for name, n in rows.items()
               if n.transformers or baseline["cases"].get(name, {}).get("transformers")}
    out, unexplained = [], []
    explained: set[str] = set()
    for lib in V.LIBRARIES:
        mine = [m for m in all_moves if lib == "torch" or m.case in uses_tf]
        if lib not in changed:
            out.append(Verdict(lib, here.get(lib, ""), made.get(lib, ""), "baseline",
                               "the version the baseline was made with"))
            continue
        explained.update(m.case for m in mine)
        n = sum(1 for name in rows if lib == "torch" or name in uses_tf)
        others = [o for o in changed if o != lib]
        also = f" ({', '.join(others)} differs too)" if others and mine else ""
        if not mine:
            out.append(Verdict(lib, here[lib], made.get(lib, ""), "same",
                               f"same numbers ({n} runs that use it)"))
        elif all(m.within for m in mine):
            worst = max(mine, key=lambda m: abs(m.percent or 0))
            most = (f", at most {worst.text()}" if worst.percent is not None else "")
            out.append(Verdict(lib, here[lib], made.get(lib, ""), "within",
                               f"moved within tolerance: {len({m.case for m in mine})} of {n} "
                               f"runs{most}{also}", mine))
        else:
            past = sorted((m for m in mine if not m.within),
                          key=lambda m: -abs(m.percent if m.percent is not None else 1e9))
            shown = "; ".join(m.text() for m in past[:3])
            more = f"; {len(past) - 3} more" if len(past) > 3 else ""
            out.append(Verdict(lib, here[lib], made.get(lib, ""), "moved",
                               f"moved: {shown}{more}{also}", mine))
    for m in all_moves:
        if m.case not in explained:
            unexplained.append(m.text())
    return out, unexplained


# ---- the outcome: the user's record and a report file ----------------------------------------
def record(verdicts_: list[Verdict], here: dict[str, str]) -> Path:
    """Each library that differs from the baseline, with its outcome, into the user's record
    (lab.measure.versions reads it: a passed version stops the note)."""
    path = V.user_record_path()
    data = V.user_record()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for v in verdicts_:
        if v.outcome == "baseline":
            continue
        data.setdefault(v.library, {})[v.version] = {
            "outcome": v.outcome, "summary": v.summary, "date": now,
            "with": {k: x for k, x in here.items() if k != v.library}}
    path.parent.mkdir(parents=True, exist_ok=True)
    from lab.atomic import atomic_write

    atomic_write(path, json.dumps(data, indent=1) + "\n")
    return path


def save_report(rows: dict[str, Numbers], verdicts_: list[Verdict], unexplained: list[str],
                here: dict[str, str]) -> Path:
    """The whole run, for `memlab dev versions --add/--baseline --from FILE`."""
    folder = V.user_record_path().parent / "validation"
    folder.mkdir(parents=True, exist_ok=True)
    name = "-".join(f"{k}-{_base(here.get(k, ''))}" for k in V.LIBRARIES) + ".json"
    doc = {"format": FORMAT, "versions": here,
           "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "verdicts": [{"library": v.library, "version": v.version, "outcome": v.outcome,
                         "summary": v.summary} for v in verdicts_],
           "unexplained": unexplained,
           "cases": {k: asdict(n) for k, n in rows.items()}}
    from lab.atomic import atomic_write

    atomic_write(folder / name, json.dumps(doc, indent=1) + "\n")
    return folder / name


def load_report(path: Path) -> tuple[dict[str, Numbers], dict[str, str]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("format") != FORMAT or "cases" not in doc:
        raise ValueError(f"{path} is not a report of `memlab doctor --validate`")
    return {k: Numbers(**v) for k, v in doc["cases"].items()}, doc["versions"]


# ---- the project's files (memlab dev versions) ------------------------------------------------
def baseline_to_extend(here: dict[str, str], path: Path = BASELINE_PATH) -> tuple[dict[str, Numbers], list[str]]:
    """For `--baseline --new`: (the baseline's cases still in the course, the course's cases it
    lacks). ValueError where there is none, or it was made on other versions than `here` (its
    numbers and the new ones must come from one torch and transformers)."""
    doc = load_baseline(path)
    if doc is None:
        raise ValueError("no validation baseline to extend: `memlab dev versions --baseline`")
    made = doc["made_with"]
    other = [f"{lib} {made.get(lib)} (baseline) vs {here.get(lib)} (here)" for lib in V.LIBRARIES
             if made.get(lib) != here.get(lib)]
    if other:
        raise ValueError("the baseline was made on other versions: " + ", ".join(other)
                         + "; rewrite it whole (`memlab dev versions --baseline`)")
    names = [c.name for c in cases()]
    kept = {n: Numbers(**doc["cases"][n]) for n in names if n in doc["cases"]}
    return kept, [n for n in names if n not in doc["cases"]]


def write_baseline(rows: dict[str, Numbers], here: dict[str, str], path: Path = BASELINE_PATH) -> Path:
    """The baseline from a run on the pinned versions (the caller checks that they are)."""
    from lab.atomic import atomic_write

    made = {k: here[k] for k in (*V.LIBRARIES, "python")}
    atomic_write(path, json.dumps(baseline_document(rows, made), indent=1) + "\n")
    return path


def add_to_table(verdicts_: list[Verdict], here: dict[str, str],
                 path: Path = V.TABLE_PATH) -> list[str]:
    """Each library version that passed (same numbers, or moved within tolerance) joins its
    library's validated list in versions.json; what was added, as lines."""
    from lab.atomic import atomic_write

    doc = json.loads(path.read_text(encoding="utf-8"))
    added = []
    day = datetime.now(timezone.utc).date().isoformat()
    for v in verdicts_:
        if v.outcome not in V.PASSED:
            continue
        minor = V.minor_of(v.version)
        listed = doc["libraries"][v.library]["validated"]
        if any(e["version"] == minor for e in listed):
            continue
        others = ", ".join(f"{k} {x}" for k, x in here.items() if k in V.LIBRARIES and k != v.library)
        listed.append({"version": minor, "how": f"memlab doctor --validate on {v.version} "
                       f"with {others}, {day}: {v.summary}"})
        added.append(f"{v.library} {minor}: {v.summary}")
    if added:
        atomic_write(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        V.table.cache_clear()
    return added


__all__ = ["BASELINE_PATH", "Case", "Move", "Numbers", "TOLERANCE", "Verdict",
           "baseline_document", "baseline_to_extend", "cases", "digest", "installed_versions",
           "load_baseline", "load_report",
           "add_to_table", "moves", "record", "run_all", "run_case", "save_report", "verdicts",
           "write_baseline"]
