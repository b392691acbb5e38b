"""`memlab dev check`: it passes on a sound lesson and fails, naming file and rule, on each way a
lesson can go wrong (issue 8 and 9 bars). Each case tampers with a copy of lesson 01 and its
H200 recordings in a temporary course folder."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.course.curriculum import LESSONS_DIR, load_course
from lab.dev.check import check
from lab.course.reference import REFERENCE_DIR

LESSON = "01-linear-baseline"


@pytest.fixture
def course_copy(tmp_path) -> tuple[Path, Path]:
    lessons, ref = tmp_path / "lessons", tmp_path / "reference"
    lessons.mkdir()
    (lessons / "course.toml").write_text('title = "A course of one lesson"\n')  # no parts
    shutil.copytree(LESSONS_DIR / LESSON, lessons / LESSON)
    shutil.copytree(REFERENCE_DIR / "linear-baseline", ref / "linear-baseline")
    return lessons, ref


def problems(lessons: Path, ref: Path) -> list[str]:
    return [str(p) for p in check(load_course(lessons), ref) if not p.warning]


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def test_the_sound_copy_passes(course_copy):
    assert problems(*course_copy) == []


def test_a_missing_heading_is_named(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.md", "## Take-away", "## Summary")
    found = problems(lessons, ref)
    assert any("lesson.md" in p and "headings:" in p and "Take-away" in p for p in found), found


def test_a_typed_number_is_named(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.md", "{{no-grad-peak}}", "4.20 GB")
    found = problems(lessons, ref)
    assert any(re.search(r"lesson\.md:\d+: text: '4\.20 GB'", p) for p in found), found


def test_a_recorded_number_changed_by_three_percent_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.toml", 'value = "4.40 GB"', 'value = "4.53 GB"')  # +3 %
    found = problems(lessons, ref)
    assert any("lesson.toml" in p and "claims: baseline-peak" in p and "4.40 GB" in p
               for p in found), found


def test_a_direction_turned_around_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.toml", 'direction = "lower"', 'direction = "higher"')
    found = problems(lessons, ref)
    assert any("claims: no-grad-lower" in p and "not higher" in p for p in found), found


def test_lowers_turned_into_raises_in_what_a_claim_says_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.toml", 'direction = "lower"',
         'direction = "lower"\nsays = "raises the peak"')
    found = problems(lessons, ref)
    assert any("claims: no-grad-lower" in p and "does not read as 'lower'" in p for p in found), found


def test_a_deleted_quiz_answer_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.toml", "answer = 1\n", "")
    found = problems(lessons, ref)
    assert any("lesson.toml" in p and "answer" in p and "missing" in p for p in found), found


def test_an_edited_h200_block_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.md", "| baseline | ok | 4.400 GB", "| baseline | ok | 4.532 GB")
    found = problems(lessons, ref)
    assert any("cite:" in p for p in found), found


def test_a_placeholder_without_a_claim_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.md", "{{no-grad-peak}}", "{{no-grad-peek}}")
    found = problems(lessons, ref)
    assert any("{{no-grad-peek}} names no claim" in p for p in found), found


def test_the_answer_shown_before_the_run_fails(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.md", "## What to look for in the plot",
         "The peak will be about {{def:4.5 GB}}.\n\n## What to look for in the plot")
    found = problems(lessons, ref)
    assert any("reveals:" in p and "4.5 GB" in p for p in found), found


def test_a_missing_recording_fails_unless_pending(course_copy):
    lessons, ref = course_copy
    (ref / "linear-baseline" / "no_grad.json").unlink()
    found = problems(lessons, ref)
    assert any("no_grad.json" in p and "reference:" in p for p in found), found
    edit(lessons / LESSON / "lesson.toml", 'timeout_s = 300', 'timeout_s = 300\npending = ["no_grad"]')
    from lab.course.curriculum import load_lesson
    from lab.dev.cite import update

    update(load_lesson(lessons / LESSON), ref)  # the H200 block now lists one run
    assert problems(lessons, ref) == []  # pending: a warning, and its claims wait


def test_dev_new_scaffolds_a_lesson_that_checks_with_warnings_only(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "course.toml").write_text('title = "A new course"\n')
    from lab.dev.new import new_lesson

    new_lesson(lessons, "16-my-lesson", "My lesson")
    found = check(load_course(lessons), tmp_path / "reference")
    assert [p for p in found if not p.warning] == [], [str(p) for p in found]
    assert any(p.warning and "pending" in p.message for p in found)


def test_the_cli_exits_nonzero_and_names_file_and_rule(course_copy):
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.md", "## Take-away", "## Summary")
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "dev", "check", "--lessons",
                           str(lessons), "--reference", str(ref)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "lesson.md: headings:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("old, new, field", [
    ('summary = "What {{def:2 GB}}', 'summary = "What {{def 2 GB}}', "summary"),
    ('summary = "What {{def:2 GB}}', 'summary = "What {{def:2 GB}', "summary"),
    ('title = "', 'title = "{{big}} ', "title"),
])
def test_markup_left_in_any_field_fails(course_copy, old, new, field):
    # Given a typo in the markup of a field the header or the palette shows, the check names
    # the field (the text of a title or summary is shown as it renders, braces and all)
    lessons, ref = course_copy
    edit(lessons / LESSON / "lesson.toml", old, new)
    found = problems(lessons, ref)
    assert any(f"markup: {field} shows unrendered markup" in p for p in found), found


def test_every_field_a_learner_reads_is_rendered():
    # the shipped course: no field shows {{…}} (lesson 01's summary and 18's used to)
    course = load_course()
    for lesson in course.lessons:
        for where, text in lesson.shown_texts():
            assert "{{" not in text and "}}" not in text, (lesson.id, where, text)
    assert course.find("01").summary.startswith("What 2 GB of weights, a 0.2 GB input")


def test_the_h200_block_lists_the_metrics_a_claim_cites_and_no_others(course_copy):
    # Given a recording with two metrics, of which the text cites one, then the rendered block
    # shows that one, for the variant the claim names, and not the other (lesson 17 printed ~80)
    import json

    from lab.course.curriculum import load_lesson
    from lab.dev.cite import load_results, render

    lessons, ref = course_copy
    path = ref / "linear-baseline" / "baseline.json"
    d = json.loads(path.read_text(encoding="utf-8"))
    d["metrics"] = {"cited_bytes": 1.5e9, "uncited_bytes": 2.5e9}
    path.write_text(json.dumps(d), encoding="utf-8")
    edit(lessons / LESSON / "lesson.toml", "[[claims]]",
         '[[claims]]\nid = "cited"\nvariant = "baseline"\nquantity = "metric:cited_bytes"\n'
         'value = "1.5 GB"\n\n[[claims]]')
    lesson = load_lesson(lessons / LESSON)
    block = render(lesson, load_results(lesson, ref))
    assert "baseline cited_bytes = 1.500 GB" in block
    assert "uncited_bytes" not in block


def test_the_h200_block_says_what_a_step_time_is_where_it_is_not_a_timed_median(course_copy):
    # Given lesson 01's two recordings, one made a single step (its warm-up in it) and one
    # recorded before the timed pass (no `timing`) on two ranks, then the block says so under
    # the table, naming each, and shows rank 1's step time
    import json

    from lab.course.curriculum import load_lesson
    from lab.dev.cite import load_results, render

    lessons, ref = course_copy
    base, other = ref / "linear-baseline" / "baseline.json", ref / "linear-baseline" / "no_grad.json"
    d = json.loads(base.read_text(encoding="utf-8"))
    d["timing"] = {"steps_s": [0.1], "warmup_steps": 0, "method": "one step"}
    base.write_text(json.dumps(d), encoding="utf-8")
    d = json.loads(other.read_text(encoding="utf-8"))
    d["timing"], d["schema"] = None, 1
    d["ranks"] = [dict(d, ranks=[]), dict(d, ranks=[], step_time_s=0.25)]
    other.write_text(json.dumps(d), encoding="utf-8")
    lesson = load_lesson(lessons / LESSON)
    block = render(lesson, load_results(lesson, ref))
    assert "baseline ran a single step: its time includes the warm-up" in block
    assert "The step times of no_grad were recorded before the lab timed steps one by one" in block
    assert "Step times are rank 0's; rank 1's: no_grad 250.0 ms." in block


def test_a_superseded_claim_is_checked_against_its_own_recording(course_copy):
    # Given an earlier recording of the baseline beside the reference folder (its step time
    # 10 ms longer), then a claim naming it reads that recording, and only that one
    import json

    lessons, ref = course_copy
    earlier = ref.parent / "superseded" / "2026-11-30" / "linear-baseline"
    earlier.mkdir(parents=True)
    d = json.loads((ref / "linear-baseline" / "baseline.json").read_text(encoding="utf-8"))
    then = d["step_time_s"] + 0.010
    d["step_time_s"] = then
    (earlier / "baseline.json").write_text(json.dumps(d), encoding="utf-8")
    claim = ('[[claims]]\nid = "then"\nvariant = "baseline"\nquantity = "step_time"\n'
             f'value = "{then * 1e3:.1f} ms"\nsuperseded = "2026-11-30"\n\n[[claims]]')
    edit(lessons / LESSON / "lesson.toml", "[[claims]]", claim)
    assert problems(lessons, ref) == []
    # the current recording's time does not back it
    edit(lessons / LESSON / "lesson.toml", f'value = "{then * 1e3:.1f} ms"',
         f'value = "{(then - 0.010) * 1e3:.1f} ms"')
    found = problems(lessons, ref)
    assert any("claims: then: (superseded recording 2026-11-30" in p and "reads" in p
               for p in found), found
    # nor does a date with no recording
    edit(lessons / LESSON / "lesson.toml", 'superseded = "2026-11-30"', 'superseded = "2026-10-01"')
    found = problems(lessons, ref)
    assert any("claims: then:" in p and "no cuda recording of variant 'baseline'" in p
               for p in found), found


def _ground_truth(ref: Path, cases: dict) -> None:
    """A ground-truth file beside the copy's recordings, as assets/ground_truth is beside
    assets/reference."""
    import json

    folder = ref.parent / "ground_truth"
    folder.mkdir(exist_ok=True)
    (folder / "profile_h200.json").write_text(json.dumps({"schema": 1, "cases": cases}))


GT_CASE = {"script": "bench/ground_truth/hf_loop.py", "args": ["--batch", "1"], "status": "ok",
           "max_allocated": 4_404_019_200, "max_reserved": 4_404_019_712,
           "gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "transformers": "5.24.0",
           "recorded": "2026-12-02T01:14:42+00:00", "cap_gib": 16,
           "probes": [{"batch": 2, "status": "ok", "max_allocated": 8_808_038_400,
                       "max_reserved": 8_900_000_000, "num_alloc_retries": 0,
                       "gpu": "NVIDIA H200", "torch": "2.11.0+cu130",
                       "transformers": "5.24.0"}]}


def test_a_ground_truth_claim_is_checked_against_the_case_its_variant_names(course_copy):
    # Given lesson 01's variants naming ground-truth cases of the same loop (a case, and a fit
    # case's probe), without recordings of their own, and claims on those cases' numbers
    from lab.course.curriculum import load_lesson
    from lab.dev.cite import update

    lessons, ref = course_copy
    _ground_truth(ref, {"hf/x/fp32": GT_CASE})
    toml = lessons / LESSON / "lesson.toml"
    edit(toml, 'name = "baseline"\n', 'name = "baseline"\nground_truth = "hf/x/fp32"\n')
    edit(toml, 'name = "no_grad"\n', 'name = "no_grad"\nground_truth = "hf/x/fp32@2"\n')
    edit(toml, "[[claims]]", '[[claims]]\nid = "gt-alloc"\nvariant = "baseline"\n'
         'quantity = "allocated"\nsource = "ground_truth"\nvalue = "4.40 GB"\n\n'
         '[[claims]]\nid = "gt-double"\nvariant = "no_grad"\nrelative_to = "baseline"\n'
         'quantity = "allocated"\nsource = "ground_truth"\nvalue = "2.0×"\n'
         'direction = "higher"\n\n[[claims]]')
    for name in ("baseline", "no_grad"):
        (ref / "linear-baseline" / f"{name}.json").unlink()
    edit(toml, 'timeout_s = 300', 'timeout_s = 300\npending = true')  # lesson 01's own claims wait
    update(load_lesson(lessons / LESSON), ref)
    # then the check passes, and the rendered block shows the cases, the probe's cap, versions
    assert problems(lessons, ref) == []
    block = (lessons / LESSON / "lesson.md").read_text(encoding="utf-8")
    assert "| baseline | hf/x/fp32 | ok | 4.404 GB |" in block
    assert "--batch 2`, under its 16 GiB cap without a retry" in block
    assert "torch 2.11.0+cu130, transformers 5.24.0" in block
    # when a stated number moves, the claim fails though the lesson is pending
    edit(toml, 'value = "4.40 GB"', 'value = "4.53 GB"')
    found = problems(lessons, ref)
    assert any("claims: gt-alloc" in p and "the ground truth reads 4.40 GB" in p
               for p in found), found
    # and a variant naming a case the ground truth does not hold fails under reference
    edit(toml, 'value = "4.53 GB"', 'value = "4.40 GB"')
    edit(toml, 'ground_truth = "hf/x/fp32@2"', 'ground_truth = "hf/x/fp32@3"')
    found = problems(lessons, ref)
    assert any("reference: no_grad:" in p and "no probe at batch 3" in p for p in found), found


def test_a_fit_probe_the_cap_touched_is_not_a_ground_truth(course_copy):
    from lab.course.ground_truth import GroundTruthError, find

    retried = {**GT_CASE, "probes": [{**GT_CASE["probes"][0], "num_alloc_retries": 2}]}
    assert find("hf/x/fp32@2", {"hf/x/fp32": GT_CASE}).max_allocated == 8_808_038_400
    with pytest.raises(GroundTruthError, match="retried under the 16 GiB cap"):
        find("hf/x/fp32@2", {"hf/x/fp32": retried})
    with pytest.raises(GroundTruthError, match="no case"):
        find("hf/y/fp32", {"hf/x/fp32": GT_CASE})


def test_a_simulated_only_variant_has_no_recording_and_no_claims(course_copy):
    # Given a variant whose own modes leave out the GPU (`modes = ["sim"]`: lesson 22's
    # fsdp_offload, which the lab has had no GPUs to record), then a recording of it is stray,
    # a claim naming it is refused, and without them nothing is missing
    lessons, ref = course_copy
    toml = lessons / LESSON / "lesson.toml"
    edit(toml, 'as soon as nothing names it."', 'as soon as nothing names it."\nmodes = ["sim"]')
    from lab.course.curriculum import load_lesson

    v = load_lesson(lessons / LESSON).variant("no_grad")
    assert (v.modes, v.recorded, v.runs_in("cpu")) == (("sim",), False, False)
    assert "simulated, not recorded on the H200" in v.not_run_in("cpu")
    found = problems(lessons, ref)
    assert any("no_grad.json" in p and "reference:" in p and "never be read" in p for p in found), found
    assert any("claims:" in p and "no_grad is simulated only" in p for p in found), found
    (ref / "linear-baseline" / "no_grad.json").unlink()
    assert not any("reference:" in p for p in problems(lessons, ref))
    edit(toml, 'modes = ["sim"]', 'modes = ["tpu"]')
    found = problems(lessons, ref)
    assert any("variants[1].modes" in p and "'tpu'" in p for p in found), found
