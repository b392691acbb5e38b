"""`LessonScreen`: read, predict, run (or play the recording), look, inspect, answer.

The screen over its model: it holds one immutable `LessonRun` state (lab/tui/lesson_model.py)
and folds into it what happens — the controls change, a run starts, the runner streams, a
variant ends, Esc — then renders the state. What r and y do is decided by lab/tui/lesson_plans.py,
what the status line says by lab/tui/lesson_words.py (both headless), and the run itself goes
through the `RunDriver` widget, whose messages come up here. Before any result nothing from a
recording is shown (the predict-the-peak answer would be on screen). Everything the screen needs
comes in through `LessonDeps` (lab/tui/session.py), not from the app.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Button, Footer, Header

from lab.course.curriculum import Lesson, Question
from lab.course.progress import QUIZ_DONE, QUIZ_PASSED

from .. import lesson_plans as plans
from ..lesson_model import (Begin, CancelAsked, Finished, LessonRun, Restored, Settings, Streamed,
                            VariantDone, fold)
from ..lesson_page import header_titles, lesson_markdown
from ..lesson_words import (Words, empty_hint, idle_words, live_heading, outcome_words,
                            prediction_words, progress_forms, quiz_notice, variant_notice)
from ..look import variant_color
from ..result_set import ResultSet
from ..session import LessonDeps
from ..widgets import CodeView, InspectorView, QuizView, ResultsData, ResultsView, RunControls
from ..widgets.fit import Fit
from ..widgets.lesson_tabs import TABS, LessonTabs
from ..widgets.lesson_text import LessonText
from ..widgets.run_driver import RunDriver
from ..widgets.status import RunStatus, styled
from ..widgets.tables import variant_index
from .lesson_store import earlier_runs, keep_sets, remember_run, restore


class LessonScreen(Screen):
    BINDINGS = [
        Binding("r", "run", "Run"), Binding("y", "run_yourself", "Run it yourself"),
        Binding("escape", "cancel_or_back", "Cancel/Back"), Binding("n", "goto(1)", "Next"),
        Binding("p", "goto(-1)", "Prev", show=False),
        Binding("s", "recorded_snapshot", "Recorded snapshot", show=False),
        Binding("full_stop,comma", "typed_number", show=False),
        *[Binding(str(i + 1), f"tab('{t}')", t.capitalize(), show=False) for i, t in enumerate(TABS)],
    ]
    clock = staticmethod(time.monotonic)  # "4" then "." within 2 s is a number (tests freeze it)

    def __init__(self, lesson: Lesson, deps: LessonDeps):
        super().__init__(name=lesson.id)
        self.lesson, self.deps, self.progress = lesson, deps, deps.progress
        self.state = LessonRun.empty(v.name for v in lesson.variants)
        self.chosen = lesson.variants[0].name  # the variant the learner looks at: it runs first
        self.predict_question: Question | None = plans.predict_question(lesson)
        self._stale, self._last_tab_key = set(), (0.0, 0, "")

    def dispatch(self, event) -> LessonRun:
        self.state = fold(self.state, event)
        return self.state

    # the state, as the classroom, the palette and the tests read it
    running = property(lambda self: self.state.running)
    finished_runs = property(lambda self: self.state.completed)
    lead = property(lambda self: self.state.lead)
    beside = property(lambda self: self.state.beside)
    results = property(lambda self: list(self.state.lead.results))
    recordings = property(lambda self: self.deps.recordings(self.lesson.id))
    lp = property(lambda self: self.progress.lessons.get(self.lesson.id))

    def compose(self) -> ComposeResult:
        yield Header()
        auto = plans.resolved_mode(self.deps.choose_mode, "auto", "seed", self.lesson)
        yield LessonTabs(self.lesson, auto or "?", id="tabs")
        yield RunStatus(id="run-status")
        yield RunDriver(self.lesson, self.deps, id="driver")
        yield Footer()

    def on_mount(self) -> None:
        self.on_resize(self.app)
        self.progress.visit(self.lesson.id)
        self._choose(self.chosen, scroll=False)
        if self.lp:
            self.query_one(QuizView).restore(self.lp.quiz)
        lead, beside, label = restore(self.progress, self.deps.kept, self.lesson.id,
                                      self.deps.reference_root)
        if lead:
            self.dispatch(Restored(lead, beside, label))
        self.settings_changed()
        self.show_results()
        self.watch(self.app, "device_state", lambda _s: self.settings_changed(), init=False)

    def on_resize(self, event) -> None:
        self.title, self.sub_title = header_titles(self.lesson, event.size.width)

    def words(self, words: Words, variant: str | None = None) -> Text:
        return styled(words, variant_color(variant_index(self.lesson, variant)) if variant else "")

    # ---- the controls and the machine fold into the model; the status line follows at once ---
    def settings_changed(self) -> None:
        controls, choose = self.query_one(RunControls), self.deps.choose_mode
        auto = plans.resolved_mode(choose, "auto", controls.scale, self.lesson)
        resolved = plans.resolved_mode(choose, controls.mode, controls.scale, self.lesson)
        main = plans.main_is_recording(self.deps.machine().has_gpu, self.lesson, self.recordings)
        card = plans.recorded_card(self.lesson, self.recordings)
        state = self.dispatch(Settings(controls.mode, controls.scale, resolved, main, card))
        controls.set_auto_label(auto or "?")
        controls.set_idle_label("▶ Run yourself" if main else "▶ Run")
        self.refresh_bindings()
        if not state.running:  # what r and y would run now, even over the last run's outcome
            self.query_one(RunStatus).say(Fit(*(self.words(w) for w in idle_words(state))))

    def check_action(self, action: str, parameters) -> bool | None:
        return self.state.main_recording if action == "run_yourself" else True

    def on_select_changed(self, event) -> None:
        if event.select.id in ("mode", "scale"):
            self.settings_changed()

    # ---- showing -----------------------------------------------------------------------------
    def show_results(self) -> None:
        progress, q, state = self.progress, self.predict_question, self.state
        if state.lead:
            progress.reveal(self.lesson.id, *plans.prediction_truth(state, q))
        history = earlier_runs(progress, self.deps.kept, self.lesson.id)
        self.query_one(ResultsView).show(ResultsData.of(self.lesson, state, self.lp, q, history),
                                         self.words(empty_hint(state.main_recording, state.card)))
        revealed = bool(state.lead) or bool(self.lp and self.lp.revealed_at)
        self.query_one(LessonText).set_markdown(lesson_markdown(self.lesson, revealed))
        self.refresh_prediction()
        self.refresh_bindings()
        self._stale = {"inspector", "quiz"}  # brought up to date when shown: less work at once
        self._refresh_tab(self.query_one(LessonTabs).active)

    def refresh_prediction(self) -> None:
        words = prediction_words(self.predict_question, self.lp)
        if words is not None:
            if self.lp and self.lp.prediction_gb is not None:
                self.query_one(QuizView).commit_prediction(self.lp.prediction_gb)
            self.query_one(RunControls).show_prediction(self.words(words))

    def _refresh_tab(self, tab: str) -> None:
        if tab not in self._stale:
            return
        self._stale.discard(tab)
        lead = self.state.lead
        if tab == "inspector":
            self.query_one(InspectorView).show(self.lesson, lead.results,
                                               lead.source.short if lead else "")
        elif tab == "quiz":
            self.query_one(QuizView).set_measured(plans.measured_peaks(self.state))

    # ---- r, y and the run (the RunDriver starts it; its messages come up here) ----------------
    driver = property(lambda self: self.query_one(RunDriver))
    class_run_label = property(lambda self: plans.class_run_label(self.state))

    def action_run(self) -> None:
        self.driver.run(self.state, self.chosen, self.query_one(RunControls))

    def action_run_yourself(self) -> None:
        self.driver.run_yourself(self.state, self.chosen, self.query_one(RunControls))

    def play_class_run(self) -> None:
        self.driver.play_class_run(self.state)

    def on_run_driver_predicted(self, _message) -> None:
        self.refresh_prediction()
        self.deps.on_progress()

    def on_run_started(self, message) -> None:
        self.dispatch(Begin(message.plan))
        self.query_one(RunControls).set_running(True)
        self.query_one(RunStatus).start(Text("Starting…", style="bold"))
        self.query_one(LessonTabs).show_tab("results")
        self._draw_live(now=True)

    def on_run_progress(self, message) -> None:
        kind, name = message.event.get("type"), message.variant
        if kind in ("queued", "started") and self.query_one(CodeView).marked != name:
            self._choose(name, keep=True)
        if kind == "queued":
            self.query_one(RunStatus).start()
        state = self.dispatch(Streamed(name, message.position, message.total, message.event))
        if kind == "sample":
            self._draw_live()
        self.query_one(RunStatus).running([self.words(w, name) for w in progress_forms(state)],
                                          list(state.spark))

    def on_variant_finished(self, message) -> None:
        r, state = message.result, self.dispatch(VariantDone(message.result, message.position,
                                                             message.total))
        self._draw_live()
        if state.plan is None or state.plan.recorded:
            return  # a recording is not a run of yours: no history, no run count
        remember_run(self.progress, self.deps.kept, self.lesson.id, r, message.position,
                     state.plan.gpu_memory)
        notice = variant_notice(r)
        if notice:
            self.notify(notice[0], title=notice[1], severity=notice[2], timeout=8)

    def on_run_finished(self, message) -> None:
        plan = message.plan
        recording = ResultSet() if plan.recorded else plans.recording_set(self.lesson,
                                                                           self.recordings)
        state = self.dispatch(Finished(plan, tuple(message.results), message.cancelled, recording))
        self.query_one(RunControls).set_running(False)
        if message.results:
            keep_sets(self.progress, self.deps.kept, self.lesson.id, state.lead, state.beside)
        if plan.recorded and not message.cancelled and any(r.ok or r.status == "oom"
                                                           for r in message.results):
            self.progress.record_playback(self.lesson.id)  # seen: the map says so
        self.show_results()
        self.query_one(RunStatus).stop(Fit(*(self.words(w) for w in outcome_words(
            state.outcome, state.main_recording, state.card))))
        self.deps.on_progress()

    def _draw_live(self, now: bool = False) -> None:
        """The Results tab during a run: finished variants and the running one's timeline."""
        state = self.state
        if state.running and state.plan is not None:
            capacity = plans.live_capacity(state.plan, self.lesson, self.recordings,
                                           self.deps.machine().gpu)
            self.query_one(ResultsView).show_live(self.lesson, Text(live_heading(state.plan),
                                                                   style="bold"), state, capacity,
                                                  now)

    def action_cancel_or_back(self) -> None:
        if not self.running:
            return self.app.action_home()
        self.driver.cancel()
        self.dispatch(CancelAsked())
        self.query_one(RunStatus).say(Text("Cancelling… (stopping the worker)", style="yellow"))

    # ---- tabs, lessons and the variant looked at ------------------------------------------------
    def action_tab(self, tab: str) -> None:
        tabs = self.query_one(LessonTabs)
        self._last_tab_key = (self.clock(), TABS.index(tab) + 1, tabs.active)
        tabs.show_tab(tab)

    def on_tabbed_content_tab_activated(self, event) -> None:
        self._refresh_tab(event.pane.id)

    def action_typed_number(self) -> None:
        """"4" then "." is someone typing a prediction (4.4), not asking for tab 4: back to the
        tab they were on, the prediction box open with "4." in it."""
        when, digit, before = self._last_tab_key
        if (plans.needs_prediction(self.predict_question, self.lp)
                and self.clock() - when <= 2.0 and not self.running):
            self.query_one(LessonTabs).show_tab(before)
            self.driver.typed(self.state, self.chosen, self.query_one(RunControls), f"{digit}.")

    def action_goto(self, step: int) -> None:
        """n, p: the next or the previous lesson, in the course's order."""
        if self.running:
            self.notify("A run is in progress: Esc cancels it first.", severity="warning")
        else:
            self.app.open_lesson_offset(self.lesson, step)

    def action_recorded_snapshot(self) -> None:
        """Open the recorded allocator snapshot of the inspector's (or the first) variant."""
        variant = self.query_one(InspectorView).variant or self.lesson.variants[0].name
        path = plans.recorded_snapshot(self.deps.reference_root, self.lesson.id, variant)
        if path is None:
            return self.notify("No recorded allocator snapshot for this lesson in this install "
                               "yet.", severity="warning")
        self.app.load_snapshot(str(path))

    def _choose(self, name: str, scroll: bool = True, keep: bool = False) -> None:
        """Show `name`'s code and what it is; it runs first (`keep`: a run marks it, no choice)."""
        self.chosen = self.chosen if keep else name
        self.query_one(LessonTabs).show_variant(name, scroll)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            event.stop()
            (self.action_run_yourself if self.state.main_recording else self.action_run)()

    def on_run_controls_chosen(self, message: RunControls.Chosen) -> None:
        if not self.running:
            self._choose(message.variant)

    def on_quiz_view_answered(self, message: QuizView.Answered) -> None:
        progress, lesson = self.progress, self.lesson
        if lesson.quiz[message.index].kind == "predict_peak":
            progress.commit_prediction(lesson.id, float(message.answer))
            self.refresh_prediction()
        progress.record_answer(lesson.id, message.index, message.answer, message.correct,
                               len(lesson.quiz))
        done = progress.status(lesson.id) in (QUIZ_PASSED, QUIZ_DONE)
        if notice := quiz_notice(progress.lessons[lesson.id].quiz_score if done else None):
            self.notify(notice)
        self.deps.on_progress()


__all__ = ["LessonScreen", "lesson_markdown"]
