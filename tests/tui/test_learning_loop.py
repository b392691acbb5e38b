"""Predict, then see — on a machine without CUDA, the H200 recording is the result.

Before predicting, no number within 5 % of the answer is on screen (every tab, the whole
lesson text, the quiz); after predicting, the H200 recording plays back as the result,
labelled, and "run it yourself" is one key away and shows its difference from the recording.
A prediction is committed once; quiz answers are final; a calibration record keeps how close
the predictions were.
"""

from __future__ import annotations

import re

import shutil

import pytest
from textual.widgets import Input, RadioSet, Static, TabbedContent

from lab.course.curriculum import RESULTS_MARKER, load_course, predicted_answer_gb
from lab.course.progress import Progress
from lab.course.reference import REFERENCE_DIR, load_reference
from lab.runner.replay import ReplayRunner
from lab.tui.screens import CalibrationScreen, HomeScreen
from lab.tui.screens.predict import PredictScreen

from tui_helpers import (COURSE, RUNS, make_app, numbers_near, run_and_wait, screen_text,
                         text_of, wait_until)

LESSONS_DIR = COURSE.lessons[0].path.parent


@pytest.fixture
def split_course(tmp_path):
    """Lesson 01 as the lead is splitting every lesson.md: `<!-- results -->` before the
    measured story. (Lessons on disk that are split already are checked as they are below.)"""
    root = tmp_path / "lessons"
    shutil.copytree(LESSONS_DIR / "01-linear-baseline", root / "01-linear-baseline")
    shutil.copy(LESSONS_DIR / "course.toml", root / "course.toml")
    md = root / "01-linear-baseline" / "lesson.md"
    text = md.read_text()
    if RESULTS_MARKER not in text:
        head, sep, tail = text.partition("## What the measurement showed")
        assert sep, "lesson 01's text changed: update this fixture"
        md.write_text(head + RESULTS_MARKER + "\n\n" + sep + tail)
    return load_course(root)


def answers(lesson) -> list[float]:
    """What must not be on screen before predicting: the quiz answer and the recorded peak."""
    q = next(q for q in lesson.quiz if q.kind == "predict_peak")
    out = [predicted_answer_gb(lesson, q)]
    ref = load_reference(lesson.id, REFERENCE_DIR).get(q.variant)
    if ref is not None and ref.ok:
        out.append(ref.peak.bytes / 1e9)
    return out


async def everything_on_screen(pilot) -> str:
    """Every tab as the terminal shows it, plus the full text of every Static (scrolled-away
    parts of the lesson text and the quiz included)."""
    app, parts = pilot.app, []
    for key in "12345":
        await pilot.press(key)
        await pilot.pause()
        parts.append(screen_text(app))
    for w in app.screen.query(Static):
        if w.display:
            parts.append(text_of(app.screen, f"#{w.id}") if w.id else str(w.content))
    return "\n".join(parts)


VERSION = re.compile(r"\b(?:torch|transformers|python|peft|torchao|accelerate|pytorch-lightning"
                     r"|liger-kernel|CUDA)[\s(=\"#v]*\d+(?:\.\d+)+", re.IGNORECASE)


def near(text: str, lesson) -> list[str]:
    # a claim about memory is a number with a unit or a decimal point (line numbers, tab keys
    # and variant counts are not)
    # and a library's version ("transformers 5.24" in a code-path note) is not a claim either
    text = VERSION.sub("", text)
    hits = []
    for answer in answers(lesson):
        hits += [h for h in numbers_near(text, answer) if "." in h or not h.strip().isdigit()]
    return hits


async def check_nothing_given_away(lesson, course) -> None:
    app = make_app(references=REFERENCE_DIR, course=course)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        text = await everything_on_screen(pilot)
        assert near(text, lesson) == [], lesson.slug
        assert "H200 recording" not in text_of(app.screen, "#results-empty")


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_before_predicting_no_number_near_the_answer_is_on_screen(split_course):
    await check_nothing_given_away(split_course.lessons[0], split_course)


SPLIT = [l for l in COURSE.lessons if l.text_after and any(q.kind == "predict_peak" for q in l.quiz)]


@pytest.mark.slow  # every lesson in the app, seconds each
async def test_split_lessons_on_disk_give_nothing_away():
    # one app for every lesson (opening a lesson from a lesson replaces it, as n/p do): a fresh
    # app per lesson cost more than the lesson's own screens
    given_away = {}
    app = make_app(references=REFERENCE_DIR, course=COURSE)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        for lesson in SPLIT:
            app.open_lesson(lesson)
            await pilot.pause()
            assert app.screen.lesson.id == lesson.id
            hits = near(await everything_on_screen(pilot), lesson)
            if hits or "H200 recording" in text_of(app.screen, "#results-empty"):
                given_away[lesson.slug] = hits or ["the H200 recording, before predicting"]
    assert given_away == {}


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_after_predicting_the_h200_recording_is_the_result_and_run_it_yourself_is_near(
        split_course):
    lesson = split_course.lessons[0]
    runner = ReplayRunner(RUNS)
    app = make_app(runner, references=REFERENCE_DIR, course=split_course)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        screen = app.screen
        assert "r plays the H200 recording" in text_of(screen, "#status-text")
        # When the learner presses r, predicts 4 GB and presses Enter
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, PredictScreen)
        await pilot.press("4", "enter")
        await wait_until(pilot, lambda: screen.finished_runs == 1, tries=500)
        await app.workers.wait_for_complete()
        await pilot.pause()
        # Then the result is the H200 recording, played back, labelled with its versions
        assert runner.requests == []  # nothing ran on this machine
        assert screen.query_one(TabbedContent).active == "results"
        source = text_of(screen, "#source")
        assert "Recorded on an NVIDIA H200 (torch 2.11, transformers 5.17)" in source
        assert "not run on this machine" in source
        summary = text_of(screen, "#summary")
        assert "Peak per variant — H200 recording" in summary and "4.40 GB" in summary
        from lab.course.reference import load_reference
        from lab.report.units import seconds

        recorded = load_reference("linear-baseline", REFERENCE_DIR)["baseline"]
        assert seconds(recorded.step_time_s) in summary  # the recorded step time
        assert "4.44 GB" in summary  # the allocator's own peak
        prediction = text_of(screen, "#prediction")
        assert "4 GB" in prediction and "committed before the run" in prediction
        assert "H200 recording: 4.40 GB" in prediction and "−400.20 MB (−9%)" in prediction
        # the measured story is in the lesson text now
        assert "What the measurement showed" in screen.query_one("#text-scroll").markdown
        # and "run it yourself" is one key away, said so in the footer
        assert "Run it yourself" in screen_text(app)
        await run_and_wait(pilot, key="y")
        assert [(r.variant, r.mode, r.scale) for r in runner.requests] == [
            ("baseline", "sim", "seed"), ("no_grad", "sim", "seed")]
        # after y the learner's own run leads, the recording beside it, the difference first
        assert [r.mode for r in screen.lead.results] == ["sim", "sim"]
        assert [r.mode for r in screen.beside.results] == ["cuda", "cuda"]
        assert screen.query_one(TabbedContent).active == "results"
        assert "Your run: simulated" in text_of(screen, "#source")
        first = text_of(screen, "#first")
        assert "simulated (seed) vs H200 recording" in first
        assert "difference" in first and "±0 B (±0%)" in first  # lesson 01: exact in sim
        assert "Beside it: Recorded on an NVIDIA H200" in text_of(screen, "#beside-note")
        # the status line says what just happened
        status = text_of(screen, "#status-text")
        assert "Your run is done (sim, seed scale): 2 ok" in status
        assert "beside the H200 recording" in status
        # the recording's notes are folded, the learner's own are not
        assert screen.query_one("#recorded-notes").collapsed
    lp = Progress.load().lessons[lesson.id]
    assert lp.prediction_gb == 4.0 and not lp.prediction_late
    assert lp.truth_gb == pytest.approx(4.4002) and lp.truth_source == "H200 recording"
    assert lp.calibration_error == pytest.approx(4.0 / 4.4002 - 1)


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_a_prediction_is_committed_once_and_quiz_answers_are_final(split_course):
    lesson = split_course.lessons[0]
    predict = next(i for i, q in enumerate(lesson.quiz) if q.kind == "predict_peak")
    choice = next(i for i, q in enumerate(lesson.quiz) if q.kind == "choice")
    app = make_app(references=REFERENCE_DIR, course=split_course)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        screen = app.screen
        await run_and_wait(pilot, prediction="4.4")
        # the quiz's predict question holds the committed prediction, locked
        box = screen.query_one(f"#q{predict}-gb", Input)
        assert box.value == "4.4" and box.disabled
        assert not app.progress.commit_prediction(lesson.id, 9.9)
        # a second run does not ask again
        await run_and_wait(pilot)
        assert app.progress.lessons[lesson.id].prediction_gb == 4.4
        # a wrong choice shows the right answer and locks the question: no retry
        await pilot.press("5")
        q = lesson.quiz[choice]
        radio = screen.query_one(f"#q{choice}-choices", RadioSet)
        radio.query("RadioButton")[(q.answer + 1) % len(q.choices)].value = True
        await pilot.pause()
        assert radio.disabled
        assert f"The answer is {chr(65 + q.answer)}" in text_of(screen, f"#q{choice} .feedback")
        radio.query("RadioButton")[q.answer].value = True
        await pilot.pause()
        assert app.progress.lessons[lesson.id].quiz[str(choice)].correct is False
        # the course map and the calibration screen keep how close the prediction was
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        assert "<1%" in str(app.screen.query_one("#lessons").get_row_at(0)[2])  # 5 cells: whole %
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, CalibrationScreen)
        table = screen_text(app)
        # (the from column drops in the dialog's width; "H200 recording" matched the banner behind it)
        assert "4.4 GB" in table and "4.40 GB" in table and "<1%" in table, table
        assert "within the tolerance" in table


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_keys_work_as_the_footer_says(split_course):
    lesson = split_course.lessons[0]
    predict = next(i for i, q in enumerate(lesson.quiz) if q.kind == "predict_peak")
    app = make_app(references=REFERENCE_DIR, course=split_course)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        screen = app.screen
        tabs = screen.query_one(TabbedContent)
        # r in the quiz's number box is not swallowed: it runs (and first asks to predict)
        await pilot.press("5")
        screen.query_one(f"#q{predict}-gb", Input).focus()
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, PredictScreen)
        # typing 4.4 goes into the prediction box, not to tab 4
        await pilot.press("4", ".", "4")
        assert app.screen.query_one("#predict-box", Input).value == "4.4"
        assert tabs.active == "quiz"
        await pilot.press("escape")  # skip it this time...
        await wait_until(pilot, lambda: screen.finished_runs == 1, tries=500)
        await app.workers.wait_for_complete()
        assert app.progress.lessons[lesson.id].prediction_gb is None


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_typing_a_prediction_on_the_lesson_screen_opens_the_prediction_box(split_course):
    # Given a learner on the text tab who types "4.4" without opening anything first
    lesson = split_course.lessons[0]
    app = make_app(references=REFERENCE_DIR, course=split_course)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        screen = app.screen
        screen.clock = lambda: 0.0  # a loaded machine may take 2 s between two keys
        await pilot.press("4", ".", "4")
        await pilot.pause()
        # Then "4" did not leave them on the inspector: the prediction box holds 4.4
        assert isinstance(app.screen, PredictScreen)
        assert app.screen.query_one("#predict-box", Input).value == "4.4"
        assert screen.query_one(TabbedContent).active == "text"
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.finished_runs == 1, tries=500)
        await app.workers.wait_for_complete()
        assert app.progress.lessons[lesson.id].prediction_gb == 4.4


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_the_last_questions_feedback_is_reached_with_the_keyboard():
    lesson = COURSE.lessons[0]
    last = len(lesson.quiz) - 1
    q = lesson.quiz[last]
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        await pilot.press("5")
        box = app.screen.query_one(f"#q{last}-gb" if q.kind == "predict_peak"
                                   else f"#q{last}-choices")
        box.focus()
        await pilot.pause()
        if q.kind == "predict_peak":
            await pilot.press("4", ".", "4", "enter")
        else:
            await pilot.press("enter")
        await pilot.pause(0.2)
        # the feedback was scrolled into view: its last words are on screen
        assert q.explain.split()[-1].strip(".") in screen_text(app)


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_after_an_answer_the_next_question_is_scrolled_to_and_highlighted():
    """80×24: answering the first question brings the next one into view, marked "next", with
    the focus on it (the focus used to move to a question below the fold)."""
    lesson = next(l for l in COURSE.lessons if len(l.quiz) >= 3
                  and l.quiz[0].kind == "choice" and l.quiz[1].kind == "choice")
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        await pilot.press("5")
        app.screen.query_one("#q0-choices").focus()
        await pilot.pause()
        await pilot.press("enter")  # answer A
        await pilot.pause(0.3)
        quiz, card = app.screen.query_one("QuizView"), app.screen.query_one("#q1")
        assert card.has_class("-next") and card.border_subtitle == "next"
        assert app.focused is not None and card in app.focused.ancestors_with_self
        # the next question's text is on screen, within the quiz's view
        assert quiz.region.contains_region(card.query_one(".question").region)
        assert not app.screen.query_one("#q0").has_class("-next")


@pytest.mark.slow  # the quick tier's 2 minutes; the full suite runs it
async def test_results_are_restored_after_a_restart():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(COURSE.lessons[0])
        await pilot.pause()
        await run_and_wait(pilot)
    # Given a new session on the same data folder
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        await pilot.press("3")
        await pilot.pause()
        # Then Results shows the last run, not "No results yet"
        assert not screen.query_one("#results-empty").display
        assert [r.variant for r in screen.results] == ["baseline", "no_grad"]
        assert "from your last session" in text_of(screen, "#source")
        assert len(screen.query_one("#timeline").series) == 2
        assert "4.40 GB" in text_of(screen, "#summary")
