"""Lesson 26 (your own training script, without a GPU): what test_lesson_effects does not see.

test_lesson_effects runs every variant in sim and holds its [[checks]] to the byte, and
test_lessons runs dev check over it. Here: train.py really is the loop the H200 ground truth
ran for the cases the lesson cites (so the H200 numbers beside it are that loop's), the lesson
is refused in a served lab and only there, its predict-the-peak answer is the cited case's max
allocated, and a ground-truth number the text states that no longer reads as the case does
fails dev check.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from lab.course.curriculum import load_course, load_lesson, predict_answer
from lab.dev.check import check
from lab.course.ground_truth import find, ground_truth_file, lesson_runs, load_cases
from lab.serve.policy import LOCAL_ONLY, SERVED_ENV, lesson_refusal

ROOT = Path(__file__).resolve().parents[2]
COURSE = load_course()
LESSON = next(l for l in COURSE.lessons if l.id == "your-own-script")
CITED = [v.name for v in LESSON.variants if v.ground_truth]
HF_LOOP = "bench/ground_truth/hf_loop.py"
STEPS = 2  # forward, backward and step twice: the peak (backward 1) and zero_grad between


def _sim(fn, params):
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure

    return measure(fn,
                   VariantSpec(LESSON.id, "compare", "seed", params, timing=False),
                   backend_for("sim"))


@pytest.mark.slow  # two sim runs of GPT-2 small at batch 8 x 1,024 per case: seconds
@pytest.mark.parametrize("variant", CITED)
def test_train_py_is_the_loop_the_cited_ground_truth_case_ran(variant, monkeypatch):
    # Given a variant that cites an H200 case, when the case's own command (its script and
    # arguments, as the H200 ran them) and the lesson's variant both run in sim, then their
    # predictions agree to the byte: the same tensors in the same order, so the H200 numbers
    # the lesson states are those of train.py's loop
    from lab.profile.script import run_script
    from lab.runner.worker import load_experiment

    case = lesson_runs(LESSON)[variant]
    assert case.script == HF_LOOP, f"{variant} cites {case.case}, run by {case.script}"
    monkeypatch.chdir(ROOT)  # the case's --config is relative to the checkout, as it ran
    params = {**LESSON.params("seed"), "steps": STEPS}
    mine = _sim(getattr(load_experiment(str(LESSON.experiment_path)), variant), params)
    theirs = _sim(lambda run: run_script(run, ROOT / case.script, list(case.args), steps=STEPS),
                  params)
    assert mine.status == theirs.status == "ok", (mine.error, theirs.error)
    assert (mine.allocator.peak_allocated_bytes, mine.allocator.peak_reserved_bytes) == \
        (theirs.allocator.peak_allocated_bytes, theirs.allocator.peak_reserved_bytes)
    assert (mine.peak.bytes, mine.peak.phase) == (theirs.peak.bytes, theirs.peak.phase)


def test_the_lesson_cites_ground_truth_cases():
    # (if no variant named a case, the test above would pass without comparing anything)
    assert len(CITED) >= 4 and set(lesson_runs(LESSON)) == set(CITED)


def test_a_local_only_lesson_is_refused_in_a_served_lab_and_only_there(monkeypatch):
    other = next(l for l in COURSE.lessons if not l.local_only)
    monkeypatch.delenv(SERVED_ENV, raising=False)
    assert LESSON.local_only and lesson_refusal(LESSON) is None
    monkeypatch.setenv(SERVED_ENV, "1")
    assert lesson_refusal(LESSON) == LOCAL_ONLY and "\n" not in LOCAL_ONLY
    assert lesson_refusal(other) is None


def test_predict_the_peak_answers_with_the_cited_cases_max_allocated():
    # no H200 recording of the lesson itself: the answer is what the same loop read on the H200
    q = next(q for q in LESSON.quiz if q.kind == "predict_peak")
    case = find(LESSON.variant(q.variant).ground_truth, load_cases())
    assert predict_answer(LESSON, q) == (case.max_allocated / 1e9, "ground truth")


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    """The lesson alone in a course, with the ground truth beside an empty recordings folder."""
    lessons, ref = tmp_path / "lessons", tmp_path / "assets" / "reference"
    lessons.mkdir()
    ref.mkdir(parents=True)
    (lessons / "course.toml").write_text('title = "A course of one lesson"\n')
    shutil.copytree(LESSON.path, lessons / LESSON.path.name)
    shutil.copytree(ground_truth_file().parent, ref.parent / "ground_truth")
    return lessons / LESSON.path.name, ref


def _problems(folder: Path, ref: Path) -> list[str]:
    return [str(p) for p in check(load_course(folder.parent), ref) if not p.warning]


@pytest.mark.parametrize("claim_id", ["baseline-allocated", "small-change"])
def test_a_stated_ground_truth_number_that_moved_fails_dev_check(tmp_path, claim_id):
    # Given the lesson's copy, which passes, when one number it states from the ground truth
    # moves by a unit of its last digit, then dev check names the claim and what the case reads
    folder, ref = _copy(tmp_path)
    assert _problems(folder, ref) == []
    stated = load_lesson(folder).claim(claim_id).value
    number = re.search(r"\d+(?:\.\d+)?", stated).group(0)
    decimals = len(number.partition(".")[2])
    moved = stated.replace(number, f"{float(number) + 10 ** -decimals:.{decimals}f}")
    toml = folder / "lesson.toml"
    text = toml.read_text(encoding="utf-8")
    block = text[text.index(f'id = "{claim_id}"'):]
    block = block[:block.index("[[claims]]") if "[[claims]]" in block else len(block)]
    assert f'value = "{stated}"' in block
    toml.write_text(text.replace(block, block.replace(f'value = "{stated}"', f'value = "{moved}"')),
                    encoding="utf-8")
    found = _problems(folder, ref)
    assert any(f"claims: {claim_id}" in p and "the ground truth reads" in p for p in found), found
