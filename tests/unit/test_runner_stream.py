"""One worker-output reader for the live worker and the replay (lab.runner.stream)."""

import json

from lab.measure.result import RunResult
from lab.runner.protocol import RunRequest
from lab.runner.replay import ReplayRunner
from lab.runner.stream import WorkerStream
from lab.runner.group import combine

from ..conftest import FIXTURES

RUNS = FIXTURES / "runs"
REQ = RunRequest("linear-baseline", "baseline", mode="cpu", scale="small")


def lines(name):
    return (RUNS / "linear-baseline" / name).read_text(encoding="utf-8").splitlines()


def test_a_crash_reads_the_same_live_and_replayed():
    # Given the lines of a worker that died (exit -11) without a result
    stream, passed = WorkerStream(REQ), []
    exit_info = {}
    for line in lines("baseline.crash.jsonl"):
        if json.loads(line)["type"] == "_exit":
            exit_info = json.loads(line)
        msg = stream.feed_line(line)
        if msg is not None:
            passed.append(msg["type"])
    live = stream.outcome(exit_info["code"], exit_info["stderr"])
    replayed = ReplayRunner(RUNS, overrides={"baseline": "linear-baseline/baseline.crash.jsonl"}).run(REQ)
    assert "_exit" not in passed
    assert live.status == replayed.status == "error"
    assert live.error == replayed.error
    assert live.error.startswith("the worker exited with code -11 before reporting a result: "
                                 "Fatal Python error: Segmentation fault")
    assert live.notes == replayed.notes and live.notes[0].startswith("stderr tail:")
    assert live.timeline.events == replayed.timeline.events == 2  # the samples it streamed
    assert live.lesson == "linear-baseline"


def test_a_result_line_is_the_result_and_private_lines_are_not_passed_on():
    stream = WorkerStream(REQ)
    assert stream.feed_line('{"type":"ready","pid":1}') is None
    assert stream.feed_line("not json: a stray C++ log line") is None
    ok = [line for line in lines("baseline.cpu-small.jsonl")]
    for line in ok:
        stream.feed_line(line)
    assert stream.finished
    res = stream.outcome(0)
    assert res.status == "ok" and res.variant == "baseline"


def test_an_error_line_keeps_the_workers_words_and_the_stderr_tail():
    stream = WorkerStream(REQ)
    stream.feed_line('{"type":"error","error":"bad request: no variant x"}')
    res = stream.outcome(2, ["Traceback ...", "KeyError: x"])
    assert res.status == "error" and res.error == "bad request: no variant x"
    assert "KeyError: x" in res.notes[0]


def test_a_stray_line_ends_up_in_the_error_when_nothing_else_explains_the_exit():
    stream = WorkerStream(REQ)
    stream.feed_line("Segmentation fault (core dumped)")
    res = stream.outcome(139)
    assert res.error.endswith("Segmentation fault (core dumped)")


def test_ranks_round_trip_through_json():
    # Given two ranks' results, rank 1 failed
    stream = WorkerStream(REQ)
    for line in lines("baseline.cpu-small.jsonl"):
        stream.feed_line(line)
    r0 = stream.outcome(0)
    r1 = WorkerStream(REQ).failed("oom", "CUDA out of memory. Tried to allocate 2.00 GiB")
    top = combine([r0, r1], failed=1)
    assert top.status == "oom" and top.error.startswith("rank 1 of 2: CUDA out of memory")
    assert top.peak.bytes == r0.peak.bytes  # rank 0's numbers on top
    back = RunResult.from_dict(json.loads(json.dumps(top.to_dict())))
    assert [r.status for r in back.ranks] == ["ok", "oom"]
    assert back.ranks[0].peak.bytes == r0.peak.bytes and back.ranks[1].ranks == []
