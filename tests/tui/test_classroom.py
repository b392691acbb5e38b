"""A served workshop seen from the app: the instructor's run reaches every connected learner
(after their prediction), `goto` moves everyone, served mode keeps to the data folder, and the
test-state hook the browser test reads."""

from __future__ import annotations

import pytest

import json

from lab.course.progress import Progress
from lab.course.reference import load_reference
from lab.runner.replay import ReplayRunner
from lab.serve.classroom import Classroom
from lab.tui.app import MemLabApp
from lab.tui.screens import LessonScreen

from tui_helpers import (COURSE, NO_REFERENCE, REFERENCE, RUNS, answer_predict_prompt, run_and_wait,
                         wait_until)

LESSON = "linear-baseline"


def learner_app(workshop, name: str, prediction: float | None = None) -> MemLabApp:
    progress = Progress.load(workshop / "learners" / name / "progress.jsonl")
    if prediction is not None:
        progress.commit_prediction(LESSON, prediction)
    return MemLabApp(runner=ReplayRunner(RUNS), course=COURSE, progress=progress, gpu=None,
                     reference_root=NO_REFERENCE)


def instructor_runs():
    return list(load_reference(LESSON, REFERENCE).values())  # stands in for a run on the GPU


@pytest.mark.slow  # three apps follow one class (~8 s on 2 cores)
async def test_a_pushed_run_reaches_every_connected_learner(tmp_path, monkeypatch):
    workshop = tmp_path / "workshop"
    monkeypatch.setenv("MEMLAB_CLASS", str(workshop))
    room = Classroom(workshop)
    room.goto(LESSON)  # the class is on lesson 01: both tabs open there
    ada = learner_app(workshop, "ada", prediction=4.0)  # predicted already
    bob = learner_app(workshop, "bob")  # has not
    async with ada.run_test(size=(120, 36)) as pa, bob.run_test(size=(120, 36)) as pb:
        for pilot in (pa, pb):
            await wait_until(pilot, lambda p=pilot: isinstance(p.app.screen, LessonScreen))
        # When the instructor pushes one run of the lesson
        room.push(instructor_runs())
        # Then ada's screen shows it at once, labelled; bob is asked to predict first
        await wait_until(pa, lambda: ada.screen.results, tries=400)
        gpu = instructor_runs()[0].device.name
        assert ada.screen.class_run_label == f"run by your instructor on {gpu}"
        assert [r.variant for r in ada.screen.results] == ["baseline", "no_grad"]
        assert not bob.screen.results
        # When bob predicts and presses r, he sees the same run, and nothing ran here
        await pb.press("r")
        await answer_predict_prompt(pb, "3.5")
        await wait_until(pb, lambda: bob.screen.results, tries=400)
        assert bob.screen.class_run_label == ada.screen.class_run_label
        assert Progress.load(workshop / "learners" / "bob" / "progress.jsonl") \
            .lessons[LESSON].prediction_gb == 3.5
        assert ada.runner.requests == [] and bob.runner.requests == []
        # r again: bob runs it himself
        await run_and_wait(pb)
        assert bob.runner.requests and bob.screen.class_run_label is None


def on_lesson(app, lesson_id: str) -> bool:
    screen = app.screen
    return (isinstance(screen, LessonScreen) and screen.lesson.id == lesson_id
            and screen.is_mounted and bool(screen.query("#results-view")))


@pytest.mark.slow  # the quick tier's 2 minutes; the full suite runs it
async def test_goto_moves_every_learner_and_a_new_tab_opens_the_class_lesson(tmp_path,
                                                                             monkeypatch):
    workshop = tmp_path / "workshop"
    monkeypatch.setenv("MEMLAB_CLASS", str(workshop))
    apps = [learner_app(workshop, n) for n in ("ada", "bob")]
    async with apps[0].run_test(size=(100, 30)) as pa, apps[1].run_test(size=(100, 30)) as pb:
        await pa.pause()
        assert not isinstance(apps[0].screen, LessonScreen)
        Classroom(workshop).goto("forward-backward")
        for app, pilot in zip(apps, (pa, pb)):
            await wait_until(pilot, lambda a=app: on_lesson(a, "forward-backward"),
                             tries=400)
            await pilot.pause(0.2)  # let the screen finish mounting before the app closes
    late = learner_app(workshop, "cy")  # joins after the goto
    async with late.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: on_lesson(late, "forward-backward"), tries=400)
        await pilot.pause(0.2)


async def test_served_mode_opens_no_path_and_writes_no_screenshot(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    monkeypatch.chdir(tmp_path)
    app = learner_app(tmp_path, "ada")
    delivered = []
    monkeypatch.setattr(app, "deliver_screenshot", lambda *a, **k: delivered.append(1))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        before = type(app.screen)
        await pilot.press("o")
        await pilot.pause()
        assert type(app.screen) is before  # no path prompt
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert delivered == [1] and not list(tmp_path.glob("*.svg"))


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_test_state_file_follows_the_screen(monkeypatch, memlab_home):
    monkeypatch.setenv("MEMLAB_TEST_STATE", "1")
    app = MemLabApp(runner=ReplayRunner(RUNS), course=COURSE, progress=Progress.load(), gpu=None,
                    reference_root=NO_REFERENCE)
    path = memlab_home / "test-state.json"

    def state():
        return json.loads(path.read_text()) if path.is_file() else {}

    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: state().get("screen") == "HomeScreen", tries=400)
        await pilot.press("enter")
        await wait_until(pilot, lambda: state().get("lesson") == LESSON, tries=400)
        await run_and_wait(pilot)
        await wait_until(pilot, lambda: len(state().get("results", [])) == 2, tries=400)
        # read while the app runs: a tick during its shutdown may write the state of no screen
        final = state()
    assert final["tab"] == "results"
    assert [r["status"] for r in final["results"]] == ["ok", "ok"]
