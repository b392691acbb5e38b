"""Graded challenges (lab/challenges.py): what ships loads and points at real variants; grading
says pass or fail for the right reason; a learner's copy is never overwritten; a served lab
refuses; progress keeps the grade; the CLI's exit codes."""

import pytest

from lab import challenges as chl
from lab.cli import main as cli
from lab.curriculum import load_course
from lab.measure.result import DeviceInfo, Peak, PhaseStats, RunResult
from lab.progress import LessonProgress, Progress
from ..stderr_lines import own_lines

COURSE = load_course()
CHALLENGES = chl.all_challenges(COURSE)


def result(status="ok", peak=0, phases=(), metrics=None, error=None) -> RunResult:
    return RunResult(lesson="memory-budget", variant="challenge", mode="sim", scale="seed",
                     device=DeviceInfo("simulated", "sim"), status=status, error=error,
                     peak=Peak(bytes=int(peak)),  # bytes are integers (the result schema)
                     phases=[PhaseStats(n, 0, d, d, d) for n, d in phases], metrics=metrics or {})


class FakeRunner:
    """Answers every request with the next result; records what it was asked."""

    def __init__(self, *results):
        self.results, self.requests = list(results), []

    def run(self, req, on_event=None, cancel=None):
        self.requests.append(req)
        return self.results.pop(0)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    monkeypatch.delenv("MEMLAB_SERVED", raising=False)
    return tmp_path


def test_every_shipped_challenge_names_real_variants_and_a_starting_file():
    # Given the course on disk, then its challenges load, and each one's starting point and
    # reference solution are variants (so both are recorded on the H200 like any variant)
    assert len(CHALLENGES) >= 3
    for ch in CHALLENGES:
        names = {v.name for v in ch.lesson.variants}
        assert ch.start_variant in names and ch.solution_variant in names, ch.id
        assert "def challenge(run)" in ch.file.read_text() and ch.brief


def by_id(cid):
    return chl.find(COURSE, cid)


def test_grading_needs_every_goal():
    ch = by_id("fit-16gib")  # status ok, and the batch's bytes unchanged (8 x 1024 int64 ids)
    data = ("data 0", 8 * 1024 * 8)
    assert chl.grade(ch, result(phases=[data], peak=7e9)).passed
    oom = chl.grade(ch, result("oom", phases=[data], peak=17e9, error="CUDA out of memory. x"))
    assert not oom.passed and oom.error.startswith("CUDA out of memory")
    smaller = chl.grade(ch, result(phases=[("data 0", 4 * 1024 * 8)], peak=3e9))
    assert not smaller.passed and [g.ok for g in smaller.lines] == [True, False]


def test_a_goal_relative_to_the_starting_code():
    ch = by_id("halve-eval")  # peak <= 0.5 x the starting code's, every batch scored
    start = result(peak=40e9, metrics={"batches_scored": 4})
    assert chl.grade(ch, result(peak=19e9, metrics={"batches_scored": 4}), start).passed
    assert not chl.grade(ch, result(peak=21e9, metrics={"batches_scored": 4}), start).passed
    assert not chl.grade(ch, result(peak=1e9, metrics={"batches_scored": 1}), start).passed


def test_start_copies_once_and_fresh_keeps_a_backup(home):
    ch = by_id("fragmentation")
    path, new = chl.start(ch)
    assert new and path.read_text() == ch.file.read_text() and path.is_relative_to(home)
    path.write_text("# my work\n")
    again, new = chl.start(ch)
    assert again == path and not new and path.read_text() == "# my work\n"  # never overwritten
    chl.start(ch, fresh=True)
    backups = list(path.parent.glob("*.bak.py"))
    assert path.read_text() == ch.file.read_text() and [b.read_text() for b in backups] == ["# my work\n"]


def test_a_served_lab_refuses(home, monkeypatch):
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    from lab.serve.policy import Refused

    with pytest.raises(Refused, match="learners' code is not run on the server"):
        chl.start(by_id("fit-16gib"))
    assert not any(home.iterdir())


def test_check_runs_the_copy_in_sim_and_keeps_the_grade(home):
    ch = by_id("halve-eval")
    chl.start(ch)
    runner = FakeRunner(result(peak=30e9, metrics={"batches_scored": 4}),  # the learner's copy
                        result(peak=40e9, metrics={"batches_scored": 4}))  # the starting code
    prog = Progress.load()
    g = chl.check(ch, runner, prog)
    assert not g.passed
    mine, start = runner.requests
    assert mine.mode == "sim" and mine.experiment == str(chl.copy_path(ch))
    assert start.experiment == str(ch.file)
    # the starting code's run is kept: the next check runs the copy only
    runner = FakeRunner(result(peak=10e9, metrics={"batches_scored": 4}))
    assert chl.check(ch, runner, prog).passed and len(runner.requests) == 1
    runner = FakeRunner(result("error", error="SyntaxError"))
    assert not chl.check(ch, runner, prog).passed
    rec = Progress.load().lesson("memory-budget").challenges["halve-eval"]
    assert rec["passed"] is True and rec["last"] is False  # once passed, passed
    assert chl.summary(Progress.load(), COURSE) == (1, len(CHALLENGES))


def test_the_challenges_field_survives_a_round_trip():
    lp = LessonProgress("memory-budget", challenges={"x": {"passed": True}})
    assert LessonProgress.from_record(lp.to_record()).challenges == {"x": {"passed": True}}
    assert LessonProgress.from_record({"id": "old-record"}).challenges == {}


def test_cli_one_line_errors_and_exit_codes(home, capsys):
    assert cli(["challenge", "start", "nope"]) == 2
    assert "no challenge 'nope'" in capsys.readouterr().err
    assert cli(["challenge", "check", "fragmentation"]) == 2
    err = capsys.readouterr().err
    assert "not started" in err and len(own_lines(err)) == 1
    assert cli(["challenge", "start", "fragmentation"]) == 0
    assert str(home) in capsys.readouterr().out
    assert cli(["challenge", "list"]) == 0
    assert "fragmentation" in capsys.readouterr().out


@pytest.mark.parametrize("ch", CHALLENGES, ids=lambda c: c.id)
def test_the_recorded_reference_solution_passes_and_the_starting_code_does_not(ch):
    # A goal a reference solution cannot meet is a challenge nobody can pass (fit-16gib once
    # asked for 2 x the token ids, where x and y are one tensor): grade the H200 recordings of
    # both variants with the challenge's own goal.
    from lab.reference import REFERENCE_DIR, load_reference

    recorded = load_reference(ch.lesson.id, REFERENCE_DIR)
    if ch.solution_variant not in recorded or ch.start_variant not in recorded:
        pytest.skip(f"{ch.id}: H200 recording pending")
    start = recorded[ch.start_variant]
    solved = chl.grade(ch, recorded[ch.solution_variant], start)
    assert solved.passed, [(l.text, l.ok) for l in solved.lines]
    assert not chl.grade(ch, start, start).passed
