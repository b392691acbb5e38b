"""One learner's progress written by several processes (two tabs, a tab and a terminal).

Before the merge-on-save, two `Progress` objects loaded from one file and saved in turns kept
only the last one's changes (50 of 100 alternating updates). Here every update survives.
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass, field
from types import SimpleNamespace

from lab.course.progress import Progress
from lab.course.progress_merge import State, merge, merge_record

UPDATES = 100  # in all, alternating between the two writers


def _result(lesson: str, variant: str):
    peak = SimpleNamespace(bytes=1000, by_category={"parameters": 1000})
    return SimpleNamespace(lesson=lesson, variant=variant, mode="cpu", scale="small",
                           status="ok", peak=peak, created="2026-01-01T00:00:00+00:00",
                           step_time_s=None)


def _update(prog: Progress, writer: int, i: int) -> None:
    """Update i of a writer: a run (history + run count) or a quiz answer, alternately."""
    if i % 2 == 0:
        prog.record_run(_result("shared", f"w{writer}-{i}"))
    else:
        prog.record_answer("shared", writer * 1000 + i, i, True, 2 * UPDATES)


def _check(path) -> None:
    prog = Progress.load(path)
    variants = sorted(r.variant for r in prog.history)
    expected_runs = sorted(f"w{w}-{i}" for w in (0, 1) for i in range(UPDATES // 2) if i % 2 == 0)
    assert variants == expected_runs
    lp = prog.lessons["shared"]
    assert lp.runs == len(expected_runs)  # the counter adds both writers' increments
    assert sorted(map(int, lp.quiz)) == sorted(w * 1000 + i for w in (0, 1)
                                               for i in range(UPDATES // 2) if i % 2 == 1)


def test_two_progress_objects_saving_in_turns_keep_every_update(tmp_path):
    # Given two objects loaded from the same file (two tabs of one learner)
    path = tmp_path / "progress.jsonl"
    a, b = Progress.load(path), Progress.load(path)
    # When they update it in turns, 100 updates in all, neither re-loading
    for i in range(UPDATES // 2):
        _update(a, 0, i)
        _update(b, 1, i)
    # Then the file holds all 100, and each object sees the other's (after its own save)
    _check(path)
    assert len(b.history) == len({r.variant for r in b.history}) == UPDATES // 2


def _writer(path, writer: int, turn, cond, alternate: bool) -> None:
    prog = Progress.load(path)  # loaded once, like an app process
    for i in range(UPDATES // 2):
        if alternate:
            with cond:
                cond.wait_for(lambda: turn.value % 2 == writer, timeout=30)
        _update(prog, writer, i)
        if alternate:
            with cond:
                turn.value += 1
                cond.notify_all()


def _two_processes(path, alternate: bool) -> None:
    ctx = mp.get_context("spawn")
    turn, cond = ctx.Value("i", 0), ctx.Condition()
    procs = [ctx.Process(target=_writer, args=(path, w, turn, cond, alternate)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    if alternate:
        assert turn.value == UPDATES


def test_two_processes_updating_in_turns_lose_nothing(tmp_path):
    path = tmp_path / "progress.jsonl"
    _two_processes(path, alternate=True)
    _check(path)


def test_two_processes_updating_at_once_lose_nothing(tmp_path):
    path = tmp_path / "progress.jsonl"
    _two_processes(path, alternate=False)
    _check(path)


def test_own_runs_keep_their_identity_after_a_save(tmp_path):
    # the app tells this session's runs from the history by identity
    path = tmp_path / "progress.jsonl"
    a, b = Progress.load(path), Progress.load(path)
    mine = a.record_run(_result("l", "v1"))
    b.record_run(_result("l", "v2"))
    a.visit("l")
    assert any(r is mine for r in a.history) and len(a.history) == 2


def test_reset_wipes_what_it_saw_and_keeps_what_came_after(tmp_path):
    path = tmp_path / "progress.jsonl"
    a = Progress.load(path)
    a.record_run(_result("l", "old"))
    b = Progress.load(path)
    b.reset()
    a.record_run(_result("l", "new"))  # a has not seen the reset
    prog = Progress.load(path)
    assert [r.variant for r in prog.history] == ["new"]
    assert prog.lessons["l"].runs == 1


@dataclass
class _Lesson:  # the shape the app branch's lesson record takes (prediction committed once)
    id: str
    runs: int = 0
    quiz: dict = field(default_factory=dict)
    prediction_gb: float | None = None
    prediction_at: str = ""
    note: str = ""


def test_values_committed_once_keep_the_first_save_with_their_group():
    base = _Lesson("l")
    mine = _Lesson("l", runs=1, quiz={"0": "b"}, prediction_gb=4.0, prediction_at="t2", note="n")
    disk = _Lesson("l", runs=2, quiz={"0": "a", "1": "c"}, prediction_gb=3.0, prediction_at="t1")
    out = merge_record(base, mine, disk)
    assert (out.prediction_gb, out.prediction_at) == (3.0, "t1")  # saved first, kept whole
    assert out.quiz == {"0": "a", "1": "c"} and out.runs == 3 and out.note == "n"
    # without a conflict this process's values go in
    out = merge_record(base, mine, _Lesson("l"))
    assert (out.prediction_gb, out.prediction_at, out.quiz) == (4.0, "t2", {"0": "b"})


def test_unchanged_lessons_follow_the_disk():
    base = State("a", {"l": _Lesson("l", runs=1)}, [])
    disk = State("b", {"l": _Lesson("l", runs=5), "m": _Lesson("m")}, [])
    out = merge(base, base.snapshot(), disk, _Lesson)
    assert out.last_lesson == "b" and out.lessons["l"].runs == 5 and "m" in out.lessons
