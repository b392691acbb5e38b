"""The recorded H200 runs (assets/reference) cover the course, and the lesson texts cite them."""

import json

import pytest

from lab.dev.cite import REFERENCE_DIR, load_results, render
from lab.curriculum import load_course
from lab.measure.result import RunResult

LESSONS = load_course().lessons


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda l: l.key)
def test_every_variant_has_a_recorded_cuda_run(lesson):
    for v in lesson.variants:
        if v.name in lesson.pending:  # not recorded yet, and lesson.toml says so (dev check warns)
            continue
        path = REFERENCE_DIR / lesson.id / f"{v.name}.json"
        assert path.is_file(), f"no H200 run recorded for {lesson.key}/{v.name}"
        res = RunResult.from_dict(json.loads(path.read_text()))
        assert (res.lesson, res.variant, res.mode, res.scale) == (lesson.id, v.name, "cuda", "seed")
        assert "H200" in res.device.name
        assert res.allocator is not None  # the real allocator's numbers, not only the tracker's
        assert res.status in ("ok", "oom", "error")
        assert res.peak.bytes > 0


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda l: l.key)
def test_lesson_text_cites_the_recorded_numbers(lesson):
    # Given the recordings, when the H200 block is rendered, then lesson.md already holds it
    # (run `python -m lab.cite` after recording; never edit the block by hand).
    block = render(lesson, load_results(lesson))
    assert block in lesson.markdown, f"lessons/{lesson.slug}/lesson.md: run `python -m lab.cite`"
