"""`RunDriver`: starts a lesson's run the way r and y ask, follows it off the UI thread, and posts
what happens up to the screen.

r plays the lesson's GPU recording where there is no CUDA GPU and the lesson was recorded (its
playback is the main result), a served workshop's pushed run first; otherwise r, like y, runs
the checked variants on this machine (lab/tui/lesson_plans.py decides, headless). Before the first result of
a lesson with a predict-the-peak question it asks for the prediction (`PredictScreen`); a CPU run
at seed scale is confirmed first. Then one path for every kind of run: a thread worker hands the
requests to the one run loop (lab.runner.loop.run_all) and posts its events as messages
(lab/tui/messages.py) that bubble to the lesson screen, which folds them into its model:
messages up, calls down (frogmouth's way). It draws nothing.
"""

from __future__ import annotations

import threading

from textual import work
from textual.message import Message
from textual.widget import Widget
from textual.worker import get_current_worker

from lab.measure.modes import ModeError
from lab.report.units import SIZE_HELP, parse_size
from lab.runner.loop import run_all, side_by_side
from lab.runner.replay import ReplayRunner
from lab.serve.policy import lesson_refusal

from .. import lesson_plans as plans
from ..lesson_model import LessonRun, RunPlan, run_order
from ..lesson_words import recording
from ..messages import RunFinished, RunProgress, RunStarted, VariantFinished
from ..provenance import CLASS


class RunDriver(Widget):
    DEFAULT_CSS = "RunDriver { display: none; }"

    class Predicted(Message):
        """The learner committed a prediction before the result (the screen shows it)."""

    def __init__(self, lesson, deps, *, id: str | None = None):
        super().__init__(id=id)
        self.lesson, self.deps = lesson, deps
        self._cancel = threading.Event()
        self.in_flight = False  # started, its RunFinished not posted yet (the screen may lag)

    @property
    def recordings(self) -> dict:
        return self.deps.recordings(self.lesson.id)

    # ---- what r and y do (calls down from the screen) -------------------------------------------
    def run(self, state: LessonRun, chosen: str, controls) -> None:
        """r: the instructor's run (a workshop), the GPU's recording (no GPU here), or yours."""
        if self._busy(state):
            return
        if self.class_variants() and not state.class_run_shown:
            self._ask(lambda: self.play_class_run(state))
        elif state.main_recording:
            self._ask(lambda: self._play_recording(chosen, controls), self._plays(state))
        elif not self._refused():
            self._ask(lambda: self._run_live(chosen, controls))

    def run_yourself(self, state: LessonRun, chosen: str, controls, prefill: str = "") -> None:
        """y: on this machine, in the controls' mode and scale."""
        if not self._busy(state) and not self._refused():
            self._ask(lambda: self._run_live(chosen, controls), prefill=prefill)

    def typed(self, state: LessonRun, chosen: str, controls, prefill: str) -> None:
        """A prediction typed on the screen: what r would do, the box opened with it."""
        if state.main_recording:
            self._ask(lambda: self._play_recording(chosen, controls), self._plays(state), prefill)
        else:
            self._ask(lambda: self._run_live(chosen, controls), prefill=prefill)

    @staticmethod
    def _plays(state: LessonRun) -> str:
        """What the prediction box says happens next: "the H100 recording plays"."""
        return f"the {recording(state.card)} plays"

    def cancel(self) -> None:
        self._cancel.set()

    def class_variants(self) -> tuple[str, ...]:
        room = self.deps.classroom()
        pushed = room.pushed(self.lesson.id) if room is not None else {}
        return tuple(v.name for v in self.lesson.variants if v.name in pushed)

    def play_class_run(self, state: LessonRun) -> None:
        """A served workshop: the pushed run, played back like a recording, labelled as his."""
        variants = self.class_variants()
        if variants and not (state.running or self.in_flight):
            room = self.deps.classroom()
            self._start(plans.playback_plan(variants, room.pushed(self.lesson.id)[variants[0]],
                                            how=CLASS),
                        ReplayRunner.of_results(room.runs_dir, self.deps.playback_seconds))

    # ---- before the run ------------------------------------------------------------------------
    def _busy(self, state: LessonRun) -> bool:
        busy = state.running or self.in_flight
        if busy:
            self.notify("A run is already in progress (Esc cancels it).", severity="warning")
        return busy

    def _refused(self) -> bool:
        """A local-only lesson in a served lab: said in one line, before a prediction is asked."""
        refusal = lesson_refusal(self.lesson)
        if refusal:
            self.notify(refusal, title="Not in a served lab", severity="warning", timeout=12)
        return refusal is not None

    def _ask(self, then, what: str = "the run starts", prefill: str = "") -> None:
        from ..screens.predict import SKIP, PredictScreen

        lp, question = self.deps.progress.lessons.get(self.lesson.id), self.question
        if not plans.needs_prediction(question, lp):
            then()
            return

        def done(value: float | None) -> None:
            if value is not None and value != SKIP:
                self.deps.progress.commit_prediction(self.lesson.id, value)
                self.post_message(self.Predicted())
            self.call_after_refresh(then)  # once the dialog is gone and the focus is back

        self.app.push_screen(PredictScreen(question, what, prefill), done)

    @property
    def question(self):
        return next((q for q in self.lesson.quiz if q.kind == "predict_peak"), None)

    def _selected(self, chosen: str, controls) -> tuple[str, ...] | None:
        variants = controls.selected_variants()
        if not variants:
            self.notify("Check at least one variant to run (tab 2, Experiment).",
                        severity="warning")
        return run_order(variants, chosen) if variants else None

    def _notify_all(self, notices) -> None:
        for message, severity in notices:
            self.notify(message, severity=severity)

    def _play_recording(self, chosen: str, controls) -> None:
        choice = plans.playback_choice(self.lesson, self._selected(chosen, controls) or (),
                                       self.recordings)
        self._notify_all(choice.notices)
        if choice.variants:
            self._start(plans.playback_plan(choice.variants, self.recordings[choice.variants[0]]),
                        ReplayRunner.of_results(self.deps.reference_root,
                                                self.deps.playback_seconds))

    def _run_live(self, chosen: str, controls) -> None:
        variants = self._selected(chosen, controls)
        if self._refused() or variants is None:  # every way here asks first: keeps a new one honest
            return
        try:
            choice = self.deps.choose_mode(controls.mode, controls.scale, self.lesson.modes)
            gpu_memory = parse_size(controls.gpu_memory_text) if controls.gpu_memory_text else None
        except ModeError as e:
            return self.notify(f"{e}.", severity="error")
        except ValueError:
            return self.notify(f"Virtual GPU size {controls.gpu_memory_text!r} is not {SIZE_HELP}.",
                               severity="error")
        runs = plans.live_choice(self.lesson, variants, choice.mode)
        self._notify_all(runs.notices)
        if not runs.variants:
            return
        plan = RunPlan(runs.variants, choice.mode, choice.scale, gpu_memory, controls.mode)
        if not choice.warning:
            return self._start(plan, self.deps.runner)
        from ..screens.dialogs import ConfirmScreen  # cpu at seed scale: minutes, asked first

        self.app.push_screen(ConfirmScreen(f"{choice.warning}. Run on the CPU anyway?"),
                             lambda yes: yes and self.call_after_refresh(
                                 self._start, plan, self.deps.runner))

    # ---- the run ---------------------------------------------------------------------------------
    def _start(self, plan: RunPlan, runner) -> None:
        self._cancel, self.in_flight = threading.Event(), True
        self.post_message(RunStarted(plan))
        self._follow(plan, runner, self._cancel)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def _follow(self, plan: RunPlan, runner, cancel: threading.Event) -> None:
        worker = get_current_worker()
        total = len(plan.variants)
        jobs = 1 if plan.recorded else side_by_side(plan.mode)  # sim: one variant per core
        results = run_all(
            runner, plans.requests(plan, self.lesson, jobs), jobs=jobs, cancel=cancel,
            stop=lambda: worker.is_cancelled, announce=True,
            on_event=lambda pos, msg: self.post_message(
                RunProgress(plan.variants[pos], pos, total, msg)),
            on_result=lambda pos, result: self.post_message(VariantFinished(result, pos, total)))
        self.app.call_from_thread(setattr, self, "in_flight", False)
        self.post_message(RunFinished(plan, results, cancelled=cancel.is_set()))


__all__ = ["RunDriver"]
