"""A run request carries the lesson, not its path (issue 35 item 2): `RunRequest.for_lesson` takes
every fact from the loaded lesson once, and the worker decodes the request through the schema."""

import json

import pytest

from lab.course.curriculum import load_course
from lab.measure.schema import SchemaError
from lab.runner.protocol import WIRE, RunRequest

COURSE = load_course()


def test_a_lessons_request_is_filled_from_the_loaded_lesson():
    lesson = next(l for l in COURSE.lessons if any(v.env for v in l.variants))
    variant = next(v for v in lesson.variants if v.env)
    req = RunRequest.for_lesson(lesson, variant.name, "sim", "seed", overrides={"steps": 1})
    assert (req.lesson, req.kind, req.experiment) == (lesson.id, "lesson", str(lesson.experiment_path))
    assert req.params == {**lesson.params("seed"), "steps": 1}
    assert req.checks == [dict(c) for c in lesson.checks] and req.env == dict(variant.env)
    assert req.timeout_s == lesson.timeout_s and req.exclusive == lesson.exclusive
    assert req.expected_peak is None  # sim is not admitted by the GPU's bytes
    spec = req.spec()
    assert (spec.lesson, spec.variant, spec.scale, spec.params) == (lesson.id, variant.name, "seed",
                                                                   req.params)


def test_a_lesson_that_says_exclusive_makes_exclusive_requests():
    exclusive = next(l for l in COURSE.lessons if l.exclusive)
    shared = next(l for l in COURSE.lessons if not l.exclusive)
    assert RunRequest.for_lesson(exclusive, "baseline", "cpu").exclusive
    assert not RunRequest.for_lesson(shared, "baseline", "cpu").exclusive
    assert RunRequest.for_lesson(shared, "baseline", "cpu", exclusive=True).exclusive  # --exclusive


def test_a_request_survives_the_wire():
    lesson = COURSE.find("mixed-precision")
    req = RunRequest.for_lesson(lesson, "baseline", "cuda", "seed", gpu_memory=1 << 30)
    wire = json.loads(json.dumps(req.to_json_dict()))
    assert wire["wire"] == WIRE and RunRequest.from_json_dict(wire) == req


@pytest.mark.parametrize("change, says", [
    ({"wire": WIRE - 1}, "wire format"),
    ({"wire": None}, "wire format"),
    ({"kind": "notebook"}, "request.kind"),
    ({"ranks": "2"}, "request.ranks"),
    ({"params": [1]}, "request.params"),
])
def test_a_request_of_another_install_or_a_wrong_field_is_refused_in_one_line(change, says):
    d = {**RunRequest("label", "combo", kind="experiment", experiment="x.py").to_json_dict(), **change}
    with pytest.raises(SchemaError, match=says) as e:
        RunRequest.from_json_dict(d)
    assert "\n" not in str(e.value)
    with pytest.raises(SchemaError, match="JSON object"):
        RunRequest.from_json_dict(["not", "a", "request"])
