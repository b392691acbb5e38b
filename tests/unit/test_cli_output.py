"""What a learner without a GPU sees from the CLI: the mode and why, where every number came
from, the H200 recording beside the run, files named and announced, quiet progress, and no
traceback when the reader of a pipe leaves. Workers are replaced by a fake runner that returns
the recordings relabelled as this machine's sim runs (the spawning path is tested elsewhere)."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import main
from lab.commands.live import Live
from lab.measure.result import Peak, DeviceInfo, RunResult
from lab.course.reference import REFERENCE_DIR

from ..conftest import ROOT
from ..stderr_lines import own_lines


class FakeRunner:
    """Replays assets/reference as if this machine had simulated it (torch 2.13)."""

    def __init__(self, python=None, extra_env=None):
        pass

    def run(self, req, on_event=None, cancel=None) -> RunResult:
        lesson_id = req.lesson
        path = REFERENCE_DIR / lesson_id / f"{req.variant}.json"
        if path.is_file():
            res = RunResult.from_dict(json.loads(path.read_text()))
        else:  # a lesson whose H200 recording is pending: any ok result will do here
            res = RunResult(lesson=lesson_id, variant=req.variant, mode=req.mode, scale=req.scale,
                            device=DeviceInfo("x", "sim"), peak=Peak(bytes=10**9, phase="forward 0"))
        res.mode, res.scale, res.allocator = req.mode, req.scale, None
        res.device = DeviceInfo("simulated (FakeTensorMode)", "sim")
        res.torch_version, res.step_time_s = "2.13.0+cpu", None
        for name in ("model", "forward 0"):
            if on_event:
                on_event({"type": "phase", "name": name, "live_bytes": 1000})
        if req.profile_path:
            Path(req.profile_path).write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}))
            res.profile_path = req.profile_path
        return res


@pytest.fixture
def no_gpu(monkeypatch):
    import lab.measure.device as device
    import lab.runner.client as client

    monkeypatch.setattr(device, "cuda_available", lambda: False)
    monkeypatch.setattr(client, "default_runner", lambda **kw: FakeRunner())


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_without_a_gpu_says_mode_why_and_sources(no_gpu, capsys):
    code, out, err = _cli(capsys, "run", "01")
    assert code == 0, err
    assert "memlab: mode sim at seed scale — auto: no CUDA GPU here" in err
    assert "numbers: simulated (full scale, torch 2.13)" in out
    assert "H200 columns: recorded on an NVIDIA H200 (torch 2.11" in out
    assert "H200 peak (recorded)" in out and "vs H200" in out
    # the recording names its code paths, and the learner's run took the same ones: no line
    # about versions
    assert "the recording 2.11" not in out and "code paths than the recording" not in out
    assert "e+0" not in out and "×nan" not in out


def test_progress_is_one_line_per_variant_when_not_a_terminal(no_gpu, capsys):
    code, out, err = _cli(capsys, "run", "01", "--mode", "cpu", "--scale", "small")
    lines = err.strip().splitlines()
    assert lines[0] == "memlab: mode cpu at small scale — as asked"
    assert [l.split(":")[0] for l in lines[1:]] == ["✓ 01 baseline", "✓ 01 no_grad"]
    assert "forward 0" not in err  # nothing per phase


def test_run_and_compare_share_the_auto_rule(no_gpu):
    from argparse import Namespace

    from lab.commands import compare, run
    from lab.course.curriculum import load_course

    lesson = load_course().find("01")
    for scale, mode in ((None, "sim"), ("small", "cpu")):
        args = Namespace(mode="auto", scale=scale)
        assert run.pick_mode(args, [lesson])[0].mode == mode
        assert compare.pick_mode(args, scale).mode == mode


def test_progress_on_a_terminal_rewrites_one_line_per_variant():
    stream = io.StringIO()
    live = Live(stream, tty=True)
    live.start("03 baseline")
    for i in range(50):
        live.event("03 baseline", {"type": "phase", "name": f"forward {i}", "live_bytes": i})
    live.done("03 baseline", RunResult("x", "baseline", "cpu", "small", DeviceInfo("CPU", "cpu")))
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.count("\r\x1b[K") >= 2
    assert text.rstrip("\n").split("\r\x1b[K")[-1].startswith("✓ 03 baseline: peak 0 B")


def test_snapshot_with_several_variants_names_each_file_and_view_finds_them(no_gpu, capsys,
                                                                             tmp_path):
    p = tmp_path / "p.pkl"
    code, out, err = _cli(capsys, "run", "01", "--snapshot", str(p))
    assert code == 0
    for v in ("baseline", "no_grad"):
        f = tmp_path / f"p-{v}.pkl"
        assert f.is_file() and f"{f}  ({v})" in err
    assert "pytorch.org/memory_viz" in err
    code, out, err = _cli(capsys, "view", str(p))
    assert code == 2 and len(own_lines(err)) == 1
    assert str(tmp_path / "p-baseline.pkl") in err and "one file per variant" in err


def test_snapshots_of_several_lessons_do_not_overwrite_each_other(tmp_path):
    from lab.commands.run import snapshot_path

    names = {snapshot_path(tmp_path / "p.pkl", lesson, "baseline", False, True)
             for lesson in ("linear-baseline", "forward-backward")}
    assert len(names) == 2
    assert snapshot_path(tmp_path / "p.pkl", "l", "baseline", False, False) == str(tmp_path / "p.pkl")


def test_save_creates_the_folder_and_says_where(no_gpu, capsys, tmp_path):
    target = tmp_path / "new" / "runs"
    code, out, err = _cli(capsys, "run", "01", "--variant", "baseline", "--save", str(target))
    assert code == 0
    assert (target / "linear-baseline" / "baseline.json").is_file()
    assert f"saved 1 result as <variant>.json in {target / 'linear-baseline'}" in err


def test_export_of_a_run_without_snapshot_says_why(no_gpu, capsys, tmp_path):
    code, out, err = _cli(capsys, "run", "01", "--json")
    assert code == 0 and own_lines(err) == []  # --json: stdout is the JSON, stderr stays quiet
    (tmp_path / "result.json").write_text(out)
    code, out, err = _cli(capsys, "export", str(tmp_path / "result.json"), "--to",
                          str(tmp_path / "out"))
    assert code == 0
    assert sorted(Path(p).name for p in out.split()) == ["report.md", "result.json"]
    assert "no profile.pkl" in err and "--snapshot" in err
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Numbers: simulated (full scale, torch 2.13)." in report and "vs H200" in report


def test_export_of_a_recording_is_labelled_recorded(capsys, tmp_path):
    src = REFERENCE_DIR / "linear-baseline" / "baseline.json"
    code, out, err = _cli(capsys, "export", str(src), "--to", str(tmp_path), "--format", "md")
    assert code == 0
    report = (tmp_path / "report.md").read_text()
    assert "Numbers: recorded on an NVIDIA H200 (torch 2.11, transformers 5.17), seed scale." in report
    assert "vs H200" not in report  # a recording is not compared with itself


# ---- a reader that leaves: `memlab … | head` ----------------------------------------------------
def _closed_pipe(*args):
    """Start memlab with stdout on a pipe whose reading end is already closed: its first write
    meets EPIPE, deterministically (what `| head` does once it has read its lines)."""
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.Popen([sys.executable, "-m", "lab", *args], stdout=w,
                            stderr=subprocess.PIPE, cwd=ROOT, text=True)
    os.close(w)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["--help"], ["run", "--help"],
                                  ["view", "tests/fixtures/h200_snapshot.pickle", "--json"]])
def test_a_closed_pipe_is_no_traceback(args):
    if "view" in args and not (ROOT / args[1]).exists():
        pytest.skip("no snapshot fixture")
    code, err = _closed_pipe(*args)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
    assert code == 0, err


@pytest.mark.slow
def test_run_json_into_a_closed_pipe_is_no_traceback():
    code, err = _closed_pipe("run", "01", "--mode", "sim", "--variant", "baseline", "--json")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 0


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_run_all_is_one_summary_beside_the_recordings(no_gpu, capsys):
    code, out, err = _cli(capsys, "run", "--all")
    assert code == 0, err
    header = next(l for l in out.splitlines() if l.startswith("lesson"))
    # the course's recordings ran on two cards (lesson 27's on an H100): the columns name both
    assert "H200/H100 peak (recorded)" in header and "vs H200/H100" in header
    assert "recorded on an NVIDIA H100 80GB HBM3" in out and "recorded on an NVIDIA H200" in out
    rows = [l for l in out.splitlines() if l.startswith("linear-baseline")]
    assert rows[0].split()[1:3] == ["baseline", "ok"] and "(baseline)" in rows[0]
    assert out.count("torch 2.13; the recording 2.11") == 1
    assert "numbers: simulated (full scale, torch 2.13)" in out


def test_a_simulated_only_variant_asked_for_in_another_mode_is_refused_in_one_line(capsys):
    # lesson 22's fsdp_offload runs in sim only (lesson.toml: modes = ["sim"])
    code, out, err = _cli(capsys, "run", "many-gpus", "--mode", "cpu", "--variant", "fsdp_offload")
    assert code == 2 and len(own_lines(err)) == 2  # the mode line, then the error
    assert "fsdp_offload runs in sim only (simulated, not recorded on the H200), not in cpu" in err


def test_a_note_every_variant_carries_is_said_once_above_them():
    import json
    from pathlib import Path

    from lab.course.curriculum import load_course
    from lab.measure.result import RunResult
    from lab.report.text import lesson_report

    folder = Path(__file__).parents[1] / "fixtures" / "reference" / "linear-baseline"
    results = [RunResult.from_dict(json.loads((folder / f"{v}.json").read_text()))
               for v in ("baseline", "no_grad")]
    for r in results:
        r.notes = ["sim's version note", f"{r.variant}'s own note"]
    out = lesson_report(load_course().find("01"), results)
    assert out.count("sim's version note") == 1
    assert "note (every variant): sim's version note" in out
    assert out.count("note: baseline's own note") == out.count("note: no_grad's own note") == 1
