"""Lessons are data: loader errors name the file and field; one broken lesson spares the rest."""

import shutil
from pathlib import Path

import pytest

from lab.course.curriculum import LessonError, load_course, load_lesson
from lab.measure.formula import FormulaError, evaluate

from ..conftest import ROOT

LESSON_01 = ROOT / "lessons" / "01-linear-baseline"


def copy_lesson(tmp_path: Path, name="01-linear-baseline") -> Path:
    dst = tmp_path / name
    shutil.copytree(LESSON_01, dst)
    return dst


def test_the_shipped_course_loads_without_errors():
    course = load_course()
    assert not course.errors, [str(e) for e in course.errors]
    assert course.lessons[0].id == "linear-baseline"
    assert course.find("01") is course.find("linear-baseline") is course.find("1")


def test_a_missing_file_names_the_file(tmp_path):
    folder = copy_lesson(tmp_path)
    (folder / "lesson.md").unlink()
    with pytest.raises(LessonError) as err:
        load_lesson(folder)
    assert err.value.path.name == "lesson.md" and "missing" in str(err.value)


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace('id = "linear-baseline"', 'id = "Bad Id"'), "id"),
    (lambda t: t.replace('name = "baseline"', 'name = "first"', 1), "variants[0].name"),
    (lambda t: t.replace("answer = 1\n", "answer = 9\n", 1), "quiz[0].answer"),
    (lambda t: t.replace('expected = "batch * d_in * 4"', 'expected = "batch * nope"'), "checks[1].expected"),
    (lambda t: t.replace("[scales.small]", "[scales.tiny]"), "scales.small"),
    (lambda t: t + '\n[[checks]]\nname = "x"\nphase = "model"\nexpected = 1\nmeasure = "volume"\n',
     "checks[3].measure"),
    (lambda t: t.replace('name = "baseline"\n', 'name = "baseline"\nground_truth = "H200!"\n', 1),
     "variants[0].ground_truth"),
    (lambda t: t + '\n[[claims]]\nid = "gt"\nvariant = "baseline"\nquantity = "allocated"\n'
                   'source = "ground_truth"\nvalue = "1 GB"\n', "claims[13].source"),
    (lambda t: t.replace("timeout_s = 300", "timeout_s = 300\nlocal_only = 1"), "local_only"),
])
def test_a_bad_field_is_named(tmp_path, edit, field):
    folder = copy_lesson(tmp_path)
    toml = folder / "lesson.toml"
    toml.write_text(edit(toml.read_text()))
    with pytest.raises(LessonError) as err:
        load_lesson(folder)
    assert err.value.field == field, str(err.value)
    assert str(toml) in str(err.value)


def test_a_variant_without_a_function_names_experiment_py(tmp_path):
    folder = copy_lesson(tmp_path)
    code = folder / "experiment.py"
    code.write_text(code.read_text().replace("def no_grad(run):", "def other(run):"))
    with pytest.raises(LessonError) as err:
        load_lesson(folder)
    assert err.value.path.name == "experiment.py" and err.value.field == "no_grad"


def test_one_broken_lesson_does_not_stop_the_others(tmp_path):
    copy_lesson(tmp_path, "01-linear-baseline")
    broken = copy_lesson(tmp_path, "02-broken")
    (broken / "lesson.toml").write_text("id = [unclosed")
    course = load_course(tmp_path)
    assert [l.id for l in course.lessons] == ["linear-baseline"]
    assert len(course.errors) == 1 and "02-broken" in str(course.errors[0])
    with pytest.raises(LookupError, match="could not be loaded"):
        course.find("02")


def test_formulas_are_arithmetic_only():
    assert evaluate("(a + 1) * 4 // 2", {"a": 3}) == 8
    for bad in ["__import__('os').system('true')", "a.__class__", "[1][0]", "lambda: 1"]:
        with pytest.raises(FormulaError):
            evaluate(bad, {"a": 1})


def test_a_scale_value_beside_the_lesson_becomes_its_path_wherever_the_run_starts(tmp_path, monkeypatch):
    from pathlib import Path

    from lab.course.curriculum import load_course

    monkeypatch.chdir(tmp_path)  # the worker runs in the client's folder
    lesson = next(l for l in load_course().lessons if l.id == "memory-budget")
    model = Path(lesson.params("small")["model"])
    assert lesson.scales["small"]["model"].startswith("./")
    assert model.is_absolute() and model.is_file() and model.parent == lesson.path
    assert lesson.params("seed")["model"] == "smollm2-360m"  # a shipped name stays a name
