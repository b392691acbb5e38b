"""Running a lesson: the lesson screen's half that starts runs and follows them.

Two kinds of run take the same path (a `Runner` in a thread worker, its events posted as
messages, the timeline growing on the Results tab): the H200 recording played back
(`RecordingRunner`) — the main result on a machine without CUDA — and a run on this machine
(the injected runner: your GPU, or "run it yourself" in sim/cpu). Before the first result a
lesson with a predict-the-peak question asks for the prediction (`PredictScreen`).

Every message becomes an event of the headless `LessonRun` model (lab/tui/lesson_model.py),
folded into the screen's one state; the screen then renders the state and does the side
effects the model does not (progress, notifications). The selected variant runs first.

The results are kept per lesson (`KeptRuns.sets`, and on disk through `Progress`), so the
Results tab shows them again after a restart.
"""

from __future__ import annotations

import threading

from rich.text import Text
from textual import work
from textual.worker import get_current_worker

from lab.measure.modes import ModeError, mode_info
from lab.report.units import SIZE_HELP, parse_size
from lab.runner.loop import run_all, side_by_side
from lab.runner.protocol import RunRequest
from lab.serve.policy import lesson_refusal

from ..lesson_model import (Begin, CancelAsked, Finished, RunPlan, Streamed, VariantDone, Words,
                            live_heading, outcome_words, progress_forms, run_order)
from ..look import size, variant_color, variant_rgb
from ..messages import RunFinished, RunProgress, RunStarted, VariantFinished
from ..playback import RecordingRunner
from ..provenance import CLASS, RECORDING, source_of
from ..result_set import ResultSet
from ..widgets import CodeView, ResultsView, RunControls
from ..widgets.status import RunStatus
from ..widgets.fit import Fit
from ..widgets.tables import variant_index
from ..widgets.timeline import Series
from .dialogs import ConfirmScreen
from .lesson_store import save_sets
from .predict import SKIP, PredictScreen


class LessonRunMixin:
    """Mixed into `LessonScreen`; uses its `lesson`, `deps`, `state` and `dispatch`."""

    # ---- what r and y do here ------------------------------------------------------------------
    def recorded_variants(self) -> list[str]:
        refs = self.deps.recordings(self.lesson.id)
        return [v.name for v in self.lesson.variants if v.name in refs]

    def main_is_recording(self) -> bool:
        """No CUDA here, and the H200 recorded this lesson: its playback is the main result."""
        return not self.deps.machine().has_gpu and bool(self.recorded_variants())

    def recording_set(self) -> ResultSet:
        refs = self.deps.recordings(self.lesson.id)
        return ResultSet([refs[v] for v in self.recorded_variants()], RECORDING)

    def action_run(self) -> None:
        if self._busy():
            return
        if self.class_variants() and not self.state.class_run_shown:  # a workshop
            self._ask_prediction(self.play_class_run)
            return
        if self.main_is_recording():
            self._ask_prediction(self._play_recording)
        elif not self._refused():
            self._ask_prediction(self._run_live)

    def action_run_yourself(self) -> None:
        if not self._busy() and not self._refused():
            self._ask_prediction(self._run_live)

    def _refused(self) -> bool:
        """A local-only lesson in a served lab: say why in one line, before the prediction is
        asked for a run that will not come."""
        refusal = lesson_refusal(self.lesson)
        if refusal:
            self.notify(refusal, title="Not in a served lab", severity="warning", timeout=12)
        return refusal is not None

    def words(self, words: Words, variant: str | None = None) -> Text:  # noqa: D401
        """The model's words as Rich Text ("variant": the running variant's colour)."""
        color = variant_color(variant_index(self.lesson, variant)) if variant else ""
        return Text.assemble(*((t, f"bold {color}" if style == "variant" else style)
                               for t, style in words))

    # ---- a served workshop: the run the instructor pushed ----------------------------------------
    @property
    def class_run_label(self) -> str | None:
        """"run by your instructor on …" while the instructor's run is the result on screen."""
        lead = self.state.lead
        if lead and lead.how == CLASS:
            return source_of(lead.results[0], CLASS).long
        return None

    def class_variants(self) -> tuple[str, ...]:
        room = self.deps.classroom()
        if room is None:
            return ()
        pushed = room.pushed(self.lesson.id)
        return tuple(v.name for v in self.lesson.variants if v.name in pushed)

    def play_class_run(self) -> None:
        """Play the pushed run through the recording path, labelled as the instructor's."""
        variants = self.class_variants()
        if not variants or self.running:
            return
        room = self.deps.classroom()
        first = room.pushed(self.lesson.id)[variants[0]]  # the plan says what was recorded
        runner = RecordingRunner(room.runs_dir, self.deps.playback_seconds)
        self._start(RunPlan(variants, first.mode, first.scale, None, "class", recorded=True,
                            how=CLASS), runner)

    def _busy(self) -> bool:
        if self.running:
            self.notify("A run is already in progress (Esc cancels it).", severity="warning")
        return self.running

    def _ask_prediction(self, then, prefill: str = "") -> None:
        q = self.predict_question
        lp = self.progress.lessons.get(self.lesson.id)
        if q is None or (lp and (lp.prediction_gb is not None or lp.revealed_at)):
            then()
            return
        what = ("the H200 recording plays" if then == self._play_recording
                else "the run starts")

        def done(value: float | None) -> None:
            if value is not None and value != SKIP:
                self.progress.commit_prediction(self.lesson.id, value)
                self.refresh_prediction()
                self.deps.on_progress()
            # after the dialog is gone: the screen then takes back the focus it had, which would
            # take the tabs back to that widget's pane if the run had switched them already
            self.call_after_refresh(then)

        self.app.push_screen(PredictScreen(q, what, prefill), done)

    def _selected(self) -> tuple[str, ...] | None:
        variants = self.query_one(RunControls).selected_variants()
        if not variants:
            self.notify("Check at least one variant to run (tab 2, Experiment).",
                        severity="warning")
            return None
        return run_order(variants, self.chosen)

    def _play_recording(self) -> None:
        selected = self._selected()
        if selected is None:
            return
        recorded = self.recorded_variants()
        variants = tuple(v for v in selected if v in recorded)
        missing = [v for v in selected if v not in recorded and self.lesson.variant(v).recorded]
        simulated = [v for v in selected if not self.lesson.variant(v).recorded]
        if missing:
            self.notify(f"No H200 recording of {', '.join(missing)}: y runs it yourself.",
                        severity="warning")
        if simulated:
            self.notify(f"{', '.join(simulated)}: simulated, not recorded on the H200 "
                        "(y runs it in sim).", severity="information")
        if not variants:
            return
        first = self.deps.recordings(self.lesson.id)[variants[0]]  # as it was recorded
        runner = RecordingRunner(self.deps.reference_root, self.deps.playback_seconds)
        self._start(RunPlan(variants, first.mode, first.scale, None, "recording", recorded=True),
                    runner)

    def _run_live(self) -> None:
        if self._refused():  # every way here asks first; this keeps any new one honest
            return
        controls = self.query_one(RunControls)
        variants = self._selected()
        if variants is None:
            return
        try:
            choice = self.deps.choose_mode(controls.mode, controls.scale, self.lesson.modes)
        except ModeError as e:
            self.notify(f"{e}.", severity="error")
            return
        gpu_memory = None
        if controls.gpu_memory_text:
            try:
                gpu_memory = parse_size(controls.gpu_memory_text)
            except ValueError:
                self.notify(f"Virtual GPU size {controls.gpu_memory_text!r} is not {SIZE_HELP}.",
                            severity="error")
                return
        skipped = [v for v in variants if not self.lesson.variant(v).runs_in(choice.mode)]
        if skipped:  # a variant of some modes only (simulated, not recorded on the H200)
            self.notify("; ".join(self.lesson.variant(v).not_run_in(choice.mode) for v in skipped)
                        + ".", severity="warning")
            variants = tuple(v for v in variants if v not in skipped)
            if not variants:
                return
        plan = RunPlan(variants, choice.mode, choice.scale, gpu_memory, controls.mode)
        if choice.warning:  # cpu at seed scale: minutes; asked over the screen, not instead of it
            def confirmed(yes: bool | None) -> None:
                if yes:
                    self.call_after_refresh(self._start, plan, self.deps.runner)

            self.app.push_screen(ConfirmScreen(f"{choice.warning}. Run on the CPU anyway?"),
                                 confirmed)
            return
        self._start(plan, self.deps.runner)

    # ---- the run -------------------------------------------------------------------------------
    def _start(self, plan: RunPlan, runner) -> None:
        self._cancel = threading.Event()
        self.dispatch(Begin(plan))
        self.query_one(RunControls).set_running(True)
        status = self.query_one(RunStatus)
        status.start()
        status.running(Text("Starting…", style="bold"))
        self.show_tab("results")
        self._draw_live()
        self.run_variants(plan, runner)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def run_variants(self, plan: RunPlan, runner) -> None:
        worker = get_current_worker()
        self.post_message(RunStarted(plan))
        cancel, total = self._cancel, len(plan.variants)
        jobs = 1 if plan.recorded else side_by_side(plan.mode)  # sim: one variant per core
        # side by side, the first variant (the one the learner looks at) keeps the CPU first
        reqs = [RunRequest.for_lesson(self.lesson, variant, plan.mode, plan.scale,
                                      gpu_memory=plan.gpu_memory, background=jobs > 1 and i > 0)
                for i, variant in enumerate(plan.variants)]
        results = run_all(  # the one run loop (lab.runner.loop): "queued" first, then the worker's
            runner, reqs, jobs=jobs, cancel=cancel, stop=lambda: worker.is_cancelled, announce=True,
            on_event=lambda pos, msg: self.post_message(
                RunProgress(plan.variants[pos], pos, total, msg)),
            on_result=lambda pos, result: self.post_message(VariantFinished(result, pos, total)))
        self.post_message(RunFinished(plan, results, cancelled=cancel.is_set()))

    def on_run_progress(self, message: RunProgress) -> None:
        kind, name = message.event.get("type"), message.variant
        if kind in ("queued", "started"):
            code = self.query_one(CodeView)
            if code.marked != name:
                code.mark(name)
                self.describe_variant(name)
        if kind == "queued":
            self.query_one(RunStatus).start()
        state = self.dispatch(Streamed(name, message.position, message.total, message.event))
        if kind == "sample":
            self._live_dirty = True
        forms = [self.words(w, name) for w in progress_forms(state, size)]
        self.query_one(RunStatus).running(forms, list(state.spark))

    def on_variant_finished(self, message: VariantFinished) -> None:
        r = message.result
        state = self.dispatch(VariantDone(r, message.position, message.total))
        self._live_dirty = True
        if state.plan and state.plan.recorded:
            return  # a recording is not a run of yours: no history, no run count
        rec = self.progress.record_run(r, gpu_memory=state.plan.gpu_memory if state.plan else None)
        records = self.deps.kept.records.setdefault(self.lesson.id, [])
        if message.position == 0:
            records.clear()
        records.append(rec)
        if r.status == "error":
            self.notify(f"{r.variant}: {r.error}", title="Run failed", severity="error", timeout=8)
        elif r.status == "oom":
            self.notify(f"{r.variant} ran out of memory — see Results.", title="Out of memory",
                        severity="warning", timeout=6)

    def on_run_finished(self, message: RunFinished) -> None:
        plan = message.plan
        state = self.dispatch(Finished(plan, tuple(message.results), message.cancelled,
                                       self.recording_set() if not plan.recorded else ResultSet()))
        self.query_one(RunControls).set_running(False)
        status = self.query_one(RunStatus)
        status.stop()
        if message.results:
            self.deps.kept.sets[self.lesson.id] = (state.lead, state.beside)
            save_sets(self.progress, self.lesson.id, state.lead, state.beside)
        if plan.recorded and not message.cancelled and any(r.ok or r.status == "oom"
                                                           for r in message.results):
            self.progress.record_playback(self.lesson.id)  # seen: the map says so
        self.show_results()
        status.say(Fit(*(self.words(w) for w in outcome_words(state.outcome,
                                                             self.main_is_recording()))))
        self.deps.on_progress()

    def _draw_live(self) -> None:
        """The Results tab during a run: finished variants and the running one's timeline."""
        self._live_dirty = False
        state = self.state
        if not state.running or state.plan is None:
            return
        lesson = self.lesson
        partial = [Series(name, variant_rgb(variant_index(lesson, name)), list(d.x), list(d.y),
                          list(d.phases))
                   for name, d in state.live if d.x]
        self.query_one(ResultsView).show_live(
            lesson, Text(live_heading(state.plan), style="bold"),
            ResultSet(state.finished, state.plan.origin).in_order(state.variants), partial,
            self.live_capacity())

    def live_capacity(self) -> tuple[int, str] | None:
        plan = self.state.plan
        cap = plan.gpu_memory if plan else None
        if plan is not None and plan.recorded:
            refs = self.deps.recordings(self.lesson.id)
            cap = next((r.device.virtual_bytes for r in refs.values() if r.device.virtual_bytes),
                       None)
        elif cap is None and plan is not None:
            cap = self.lesson.scales.get(plan.scale, {}).get("gpu_memory")
        machine = self.deps.machine()
        if not cap and plan is not None and not plan.recorded and mode_info(plan.mode).on_gpu:
            total = getattr(machine.gpu, "total_bytes", None)  # your GPU's own size
            if total:
                return int(total), f"{getattr(machine.gpu, 'name', 'GPU')} capacity {size(total)}"
        if cap:
            gib = f" ({cap // 2**30} GiB)" if cap % 2**30 == 0 else ""
            return int(cap), f"GPU capped at {size(cap)}{gib}"
        return None

    def action_cancel_or_back(self) -> None:
        if self.running:
            self._cancel.set()
            self.dispatch(CancelAsked())
            self.query_one(RunStatus).say(Text("Cancelling… (stopping the worker)", style="yellow"))
        else:
            self.app.action_home()


__all__ = ["LessonRunMixin"]
