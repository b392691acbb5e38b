"""No peeking: the simulator and the workloads never read the H200 recordings (issue 10 item 4).

The recordings (assets/reference, and the superseded ones in assets/superseded) judge the
simulator; if the simulator or the code it runs could
read them, it could copy the answer. Two checks that can fail:
1. static: no module of lab.measure / lab.workloads and no lesson experiment
   names the reference folder or imports a module that reads it (lab.course.reference, lab.cite);
2. dynamic: simulating lesson variants (and importing everything that takes) opens no file under
   assets/reference, seen by a Python audit hook on every `open`.
"""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "assets" / "reference").resolve()
SUPERSEDED = (ROOT / "assets" / "superseded").resolve()
SIMULATOR = ["lab/measure", "lab/workloads"]
FORBIDDEN = re.compile(r"assets[\\/\"', ]+(?:reference|superseded)|\breference_dir\b|"
                       r"\bREFERENCE_DIR\b|\bSUPERSEDED_DIR\b|"
                       r"(?:from|import)\s+lab(?:\.course)?(?:\.|\s+import\s+)(?:reference|cite)\b")


def _sources() -> list[Path]:
    files = [p for d in SIMULATOR if (ROOT / d).is_dir() for p in (ROOT / d).rglob("*.py")]
    files += sorted((ROOT / "lessons").glob("*/experiment.py"))
    assert len(files) > 20  # the folders exist: the check looks at something
    return files


def test_simulator_sources_do_not_name_the_recordings():
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in _sources()
            for m in FORBIDDEN.finditer(p.read_text())]
    assert not hits, "the simulator must not read the recordings:\n" + "\n".join(hits)


def test_the_static_check_can_fail():
    assert FORBIDDEN.search('REF = ROOT / "assets" / "reference"')
    assert FORBIDDEN.search("from lab.course.reference import load_reference")
    assert FORBIDDEN.search("from lab import cite")
    assert FORBIDDEN.search("from lab.course import reference")
    assert FORBIDDEN.search("from lab.paths import SUPERSEDED_DIR")


_opened: list[str] = []
_watching = False


def _audit(event, args):
    if _watching and event == "open" and args and isinstance(args[0], (str, bytes, Path)):
        try:
            path = Path(args[0] if not isinstance(args[0], bytes) else args[0].decode()).resolve()
        except (OSError, ValueError):
            return
        if any(path == d or d in path.parents for d in (REFERENCE, SUPERSEDED)):
            _opened.append(str(path))


@pytest.fixture
def watch_opens():
    global _watching
    if _audit not in _installed:
        sys.addaudithook(_audit)  # cannot be removed: it only records while _watching
        _installed.append(_audit)
    _opened.clear()
    _watching = True
    yield _opened
    _watching = False


_installed: list = []


# 18 bf16 (a GPT-2 step, ~4 s) in the full suite only: the quick tier keeps 01 and 17
@pytest.mark.parametrize("key,variant", [("01", "baseline"),
                                         pytest.param("18", "bf16", marks=pytest.mark.slow),
                                         ("17", "expandable_segments")])
@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_simulating_a_lesson_opens_no_recording(watch_opens, key, variant):
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    lesson = next(l for l in load_course().lessons if l.number == int(key))  # a folder number
    # 18: the same code paths, a fraction of the work
    smaller = {"batch": 1, "seq": 128} if key == "18" else {}
    r = measure_request(RunRequest.for_lesson(lesson, variant, "sim", "seed", timing=False,
                                              overrides=smaller))
    assert r.status in ("ok", "oom")
    assert not watch_opens, f"sim opened recordings: {watch_opens}"


def test_the_audit_hook_sees_a_recording_opened(watch_opens):
    some = next(REFERENCE.rglob("*.json"))
    some.read_text()
    assert watch_opens
