"""The app never crashes on what a learner types or what their progress file holds (issue 24):
a prediction of 400 nines is refused with one line (it used to crash the tab and commit
`Infinity`, crashing every later visit), a file that already holds one opens as an unanswered
question, and a fixed, seeded sequence of random keys drives the app without a crash."""

from __future__ import annotations

import random

import pytest
from textual.widgets import Input

from lab.course.progress import Progress
from lab.course.reference import REFERENCE_DIR
from lab.tui.screens.predict import PredictScreen
from lab.tui.widgets.quiz import QuizView

from tui_helpers import COURSE, make_app, text_of, wait_until

pytestmark = pytest.mark.slow  # an app each (seconds)
LESSON = COURSE.lessons[0]
NINES = "9" * 400


async def _open_lesson(pilot):
    app = pilot.app
    await pilot.pause()
    app.open_lesson(LESSON)
    await pilot.pause()
    return app.screen


async def test_a_prediction_of_400_nines_is_refused_in_one_line_and_nothing_is_committed():
    app = make_app(references=REFERENCE_DIR)
    predict = next(i for i, q in enumerate(LESSON.quiz) if q.kind == "predict_peak")
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _open_lesson(pilot)
        # in the quiz's predict-the-peak box
        await pilot.press("5")
        await pilot.pause()
        box = screen.query_one(f"#q{predict}-gb", Input)
        box.value = NINES
        box.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "longer than 64 characters" in text_of(screen, f"#q{predict} .feedback")
        assert predict not in screen.query_one(QuizView).correct  # still open
        # in the prediction asked before the run
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, PredictScreen)
        app.screen.query_one("#predict-box", Input).value = NINES
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PredictScreen)  # still asking, with the reason
        error = text_of(app.screen, "#predict-error")
        assert "longer than 64 characters" in error and len(error.strip().splitlines()) <= 2
        lp = Progress.load().lessons.get(LESSON.id)
        assert lp is None or (lp.prediction_gb is None and str(predict) not in lp.quiz)
        # a real number then goes through as before
        app.screen.query_one("#predict-box", Input).value = "4.4"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.finished_runs == 1, tries=500)
        await app.workers.wait_for_complete()
    assert Progress.load().lessons[LESSON.id].prediction_gb == 4.4


async def test_a_progress_file_holding_infinity_opens_the_lesson_without_a_crash(memlab_home):
    # Given the file main wrote after the 400 nines: the prediction and the quiz answer inf
    predict = next(i for i, q in enumerate(LESSON.quiz) if q.kind == "predict_peak")
    memlab_home.mkdir(parents=True)
    (memlab_home / "progress.jsonl").write_text(
        '{"kind":"lesson","id":"%s","runs":1,"quiz":{"%d":{"answer":Infinity,"correct":false}},'
        '"quiz_total":%d,"prediction_gb":Infinity}\n' % (LESSON.id, predict, len(LESSON.quiz)))
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _open_lesson(pilot)  # the quiz restores its answers (main crashed)
        await pilot.press("5")
        await pilot.pause()
        assert predict not in screen.query_one(QuizView).correct  # the question is open again
        assert any("invalid value" in n.message for n in app._notifications)
    assert Progress.load().lessons[LESSON.id].prediction_gb is None


# keys a learner might hit, minus the ones that end the app (quitting is no crash) and ctrl+s
# (it writes a screenshot into the working folder)
KEYS = (list("abcdefghijklmnoprstuvwxyz0123456789.,-+=?/ ") + ["R", "N", "K", "Y"]
        + ["enter", "tab", "shift+tab", "escape", "up", "down", "left", "right", "home", "end",
           "pageup", "pagedown", "backspace", "delete", "space", "shift+left", "shift+right"])
SEED, PRESSES = 24, 80


async def test_a_seeded_sequence_of_random_keys_never_crashes_the_app():
    rng = random.Random(SEED)
    keys = [rng.choice(KEYS) for _ in range(PRESSES)]
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        for i in range(0, len(keys), 10):
            await pilot.press(*keys[i:i + 10])
            await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.is_running
    # run_test re-raises any exception the app met (a crash fails here), and the app exits 0
    assert app.return_code in (None, 0)
