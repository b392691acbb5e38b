"""A local-only lesson (lesson.toml `local_only`, lesson 26) in a lab served to a browser: r says
why in one line, before any prediction is asked for, and nothing runs (y, offered only beside an
H200 recording, goes the same way: LessonRunMixin._refused)."""

from __future__ import annotations

import pytest

from lab.serve.policy import LOCAL_ONLY
from lab.tui.screens import LessonScreen
from lab.tui.screens.predict import PredictScreen

from tui_helpers import COURSE, make_app, notices


class NeverRuns:
    def __init__(self):
        self.requests = []

    def run(self, req, on_event=None, cancel=None):
        self.requests.append(req)
        raise AssertionError("a local-only lesson ran in a served lab")


@pytest.mark.slow  # a pilot session: about a second
async def test_a_served_lab_refuses_a_local_only_lesson_and_runs_nothing(monkeypatch):
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    lesson = next(l for l in COURSE.lessons if l.local_only)
    runner = NeverRuns()
    app = make_app(runner)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen) and app.screen.lesson.id == lesson.id
        await pilot.press("r")
        await pilot.pause()
        assert not isinstance(app.screen, PredictScreen)  # no question for a run that won't come
        await app.workers.wait_for_complete()
        assert [n.message for n in notices(app) if n.message == LOCAL_ONLY] == [LOCAL_ONLY]
        assert runner.requests == [] and not app.screen.running
