"""The class state (push, goto, clear) and the instructor's view (`memlab class`): who finished,
the predictions of every learner against the measured peak, wrong answers, Markdown/CSV."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from lab.cli import main
from lab.course.curriculum import load_course
from lab.course.progress import Progress
from lab.course.reference import load_reference
from lab.serve.classroom import Classroom
from lab.serve.classview import lesson_view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LESSON = "linear-baseline"
# name -> (predicted GB, [(question, answer, correct)])
LEARNERS = {
    "ada": (4.4, [(0, 1, True), (1, 1, True), (2, 4.4, True)]),
    "bob": (2.4, [(0, 0, False), (1, 0, False)]),
    "cy": (6.0, [(0, 0, False), (1, 1, True), (2, 6.0, False)]),
}


@pytest.fixture
def workshop(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / "home"))
    root = tmp_path / "workshop"
    for name, (gb, answers) in LEARNERS.items():
        p = Progress.load(root / "learners" / name / "progress.jsonl")
        p.commit_prediction(LESSON, gb)
        for i, answer, ok in answers:
            p.record_answer(LESSON, i, answer, ok, 3)
    return root


def test_push_goto_clear(tmp_path):
    room = Classroom(tmp_path)
    assert room.read()["seq"] == 0 and room.pushed(LESSON) == {}
    runs = list(load_reference(LESSON, FIXTURES / "reference").values())
    state = room.push(runs)
    assert state["pushes"][LESSON]["variants"] == ["baseline", "no_grad"]
    assert state["pushes"][LESSON]["label"].startswith("run by your instructor on ")
    assert {v: r.peak.bytes for v, r in room.pushed(LESSON).items()} == \
        {r.variant: r.peak.bytes for r in runs}
    state = room.goto("forward-backward")
    assert state["lesson"]["id"] == "forward-backward" and state["seq"] == 2
    with pytest.raises(ValueError):
        room.push([])  # one lesson at a time
    room.clear()
    assert room.pushed(LESSON) == {} and room.read()["lesson"] is None


def test_the_view_has_every_learners_prediction_against_the_measured_peak(workshop):
    lesson = load_course().find("01")
    view = lesson_view(workshop, lesson)
    assert [r.name for r in view.rows] == ["ada", "bob", "cy"]
    assert view.predictions == [4.4, 2.4, 6.0]
    assert view.finished == ["ada", "cy"]  # every question answered
    assert view.measured_gb == pytest.approx(4.4002)  # the H200 recording until a push
    assert view.measured_by == "recorded on NVIDIA H200"
    # the most common wrong answer first: two learners thought the weights take 0.5 GB
    assert view.wrong_answers[0][:1] == (0,) and view.wrong_answers[0][2] == 2
    # a pushed run of the predicted variant at its scale becomes the measured peak
    Classroom(workshop).push(list(load_reference(LESSON).values()))
    assert lesson_view(workshop, lesson).measured_by.startswith("run by your instructor")


def test_memlab_class_shows_and_exports_the_predictions(workshop, capsys, tmp_path):
    assert main(["class", "--data", str(workshop), "show", "01"]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 learners finished: ada, cy" in out
    for name, gb in (("ada", "4.40 GB"), ("bob", "2.40 GB"), ("cy", "6.00 GB")):
        assert any(line.startswith(name) and gb in line for line in out.splitlines())
    assert "predicted peaks (GB)" in out and "\x1b[" not in out  # the histogram, plain text
    assert "'0.5 GB': 2 learner(s)" in out
    assert main(["class", "--data", str(workshop), "export", "--to", str(tmp_path / "out")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "class.csv").read_text())))
    assert [(r["learner"], float(r["predicted_gb"])) for r in rows] == \
        [("ada", 4.4), ("bob", 2.4), ("cy", 6.0)]
    md = (tmp_path / "out" / "class.md").read_text()
    assert "| bob | started |" in md and "## 01 ·" in md


def test_memlab_class_push_and_goto(workshop, capsys, tmp_path):
    out = tmp_path / "run.json"
    out.write_text(json.dumps([r.to_dict() for r in load_reference(LESSON).values()]))
    assert main(["class", "--data", str(workshop), "push", "01", "--results", str(out)]) == 0
    assert "pushed baseline, no_grad of 01" in capsys.readouterr().out
    assert main(["class", "--data", str(workshop), "goto", "3"]) == 0
    assert Classroom(workshop).read()["lesson"]["id"] == "training-cycle"
    # bad input: one line, exit 2
    assert main(["class", "--data", str(workshop), "goto", "99"]) == 2
    assert main(["class", "--data", str(workshop), "push", "02", "--results", str(out)]) == 2
    assert "holds runs of linear-baseline" in capsys.readouterr().err


def test_the_app_learns_its_gpu_from_nvidia_smi_without_a_cuda_context(tmp_path, monkeypatch):
    # forty served tabs on one GPU box must not hold forty CUDA contexts just to say "H200"
    from lab.runner.gpus import describe_first

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, GPU-aaaa, NVIDIA H200, 143771, 143000'\n"
                   "echo '1, GPU-bbbb, NVIDIA H100, 81559, 80000'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert describe_first() == ("NVIDIA H200", 143771 * 2**20, 143000 * 2**20)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    assert describe_first()[0] == "NVIDIA H100"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert describe_first() is None  # no GPU visible
