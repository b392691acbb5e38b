"""The course map's status of a lesson says what the learner did there (issue 25): a prediction
committed, a recording played back ("seen"), a run of their own, the quiz."""

from __future__ import annotations

from lab.measure.result import DeviceInfo, RunResult
from lab.course.progress import NOT_STARTED, PREDICTED, QUIZ_DONE, RUN, SEEN, Progress


def _result(lesson: str) -> RunResult:
    return RunResult(lesson=lesson, variant="baseline", mode="sim", scale="seed",
                     device=DeviceInfo("simulated", "sim"))


def test_each_step_of_the_loop_moves_the_status_and_it_survives_a_reload(tmp_path):
    path = tmp_path / "progress.jsonl"
    p = Progress(path)
    assert p.status("a") == NOT_STARTED
    p.commit_prediction("a", 4.4)
    assert p.status("a") == PREDICTED
    p.record_playback("a")
    assert p.status("a") == SEEN
    assert Progress.load(path).lessons["a"].playbacks == 1
    p.record_run(_result("a"))
    assert p.status("a") == RUN
    p.record_answer("a", 0, 1, False, total=1)
    assert p.status("a") == QUIZ_DONE
    assert Progress.load(path).status("a") == QUIZ_DONE


def test_a_playback_alone_is_seen_and_two_processes_add_their_playbacks(tmp_path):
    path = tmp_path / "progress.jsonl"
    one, two = Progress.load(path), Progress.load(path)
    one.record_playback("b")
    two.record_playback("b")
    assert Progress.load(path).lessons["b"].playbacks == 2
    assert Progress.load(path).status("b") == SEEN
