"""Running a lesson: the lesson screen's half that starts runs and follows them.

Two kinds of run take the same path (a `Runner` in a thread worker, its events posted as
messages, the timeline growing on the Results tab): the H200 recording played back
(`RecordingRunner`) — the main result on a machine without CUDA — and a run on this machine
(the injected runner: your GPU, or "run it yourself" in sim/cpu). Before the first result a
lesson with a predict-the-peak question asks for the prediction (`PredictScreen`).

The results are kept per lesson (`app.last_sets`, and on disk through `Progress`), so the
Results tab shows them again after a restart.
"""

from __future__ import annotations

import threading

from rich.text import Text
from textual import work
from textual.widgets import TabbedContent
from textual.worker import get_current_worker

from lab.report.units import SIZE_HELP, parse_size
from lab.runner.loop import run_all
from lab.runner.protocol import RunRequest

from ..look import STATUS_LABEL, size, variant_color, variant_rgb
from ..messages import RunFinished, RunPlan, RunProgress, RunStarted, VariantFinished
from ..playback import RecordingRunner
from ..provenance import CLASS, LIVE, RECORDING, source_of
from ..widgets import CodeView, ResultsView, RunControls
from ..widgets.status import RunStatus
from ..widgets.tables import ResultSet, variant_index
from ..widgets.timeline import Series
from .dialogs import ConfirmScreen
from .lesson_store import save_sets
from .predict import SKIP, PredictScreen


class LessonRunMixin:
    """Mixed into `LessonScreen`; uses its `lesson`, `lead`, `beside` and `_show_results`."""

    # ---- what r and y do here ------------------------------------------------------------------
    def recorded_variants(self) -> list[str]:
        refs = self.app.references(self.lesson.id)
        return [v.name for v in self.lesson.variants if v.name in refs]

    def main_is_recording(self) -> bool:
        """No CUDA here, and the H200 recorded this lesson: its playback is the main result."""
        return self.app.device_state != "cuda" and bool(self.recorded_variants())

    def action_run(self) -> None:
        if self._busy():
            return
        if self.class_variants() and not self.class_run_shown:  # a workshop: the instructor's run
            self._ask_prediction(self.play_class_run)
            return
        self._ask_prediction(self._play_recording if self.main_is_recording() else self._run_live)

    # ---- a served workshop: the run the instructor pushed ----------------------------------------
    class_run_shown = False

    @property
    def class_run_label(self) -> str | None:
        """"run by your instructor on …" while the instructor's run is the result on screen."""
        lead = self.lead
        if lead and lead.how == CLASS:
            return source_of(lead.results[0], CLASS).long
        return None

    def class_variants(self) -> tuple[str, ...]:
        follower = getattr(self.app, "class_follower", None)
        if follower is None:
            return ()
        pushed = follower.room.pushed(self.lesson.id)
        return tuple(v.name for v in self.lesson.variants if v.name in pushed)

    def play_class_run(self) -> None:
        """Play the pushed run through the recording path, labelled as the instructor's."""
        variants = self.class_variants()
        if not variants or self.running:
            return
        self.class_run_shown = True  # r again runs it yourself
        runner = RecordingRunner(self.app.class_follower.room.runs_dir, self.app.playback_seconds)
        self._start(RunPlan(variants, "cuda", "seed", None, "class", recorded=True, how=CLASS),
                    runner)

    def action_run_yourself(self) -> None:
        if not self._busy():
            self._ask_prediction(self._run_live)

    def _busy(self) -> bool:
        if self.running:
            self.notify("A run is already in progress (Esc cancels it).", severity="warning")
        return self.running

    def _ask_prediction(self, then, prefill: str = "") -> None:
        q = self.predict_question
        lp = self.app.progress.lessons.get(self.lesson.id)
        if q is None or (lp and (lp.prediction_gb is not None or lp.revealed_at)):
            then()
            return
        what = ("the H200 recording plays" if then == self._play_recording
                else "the run starts")

        def done(value: float | None) -> None:
            if value is not None and value != SKIP:
                self.app.progress.commit_prediction(self.lesson.id, value)
                self.refresh_prediction()
            then()

        self.app.push_screen(PredictScreen(q, what, prefill), done)

    def _selected(self) -> tuple[str, ...] | None:
        variants = self.query_one(RunControls).selected_variants()
        if not variants:
            self.notify("Check at least one variant to run (tab 2, Experiment).",
                        severity="warning")
            return None
        return variants

    def _play_recording(self) -> None:
        selected = self._selected()
        if selected is None:
            return
        recorded = self.recorded_variants()
        variants = tuple(v for v in selected if v in recorded)
        missing = [v for v in selected if v not in recorded]
        if missing:
            self.notify(f"No H200 recording of {', '.join(missing)}: y runs it yourself.",
                        severity="warning")
        if not variants:
            return
        runner = RecordingRunner(self.app.reference_root, self.app.playback_seconds)
        self._start(RunPlan(variants, "cuda", "seed", None, "recording", recorded=True), runner)

    def _run_live(self) -> None:
        controls = self.query_one(RunControls)
        variants = self._selected()
        if variants is None:
            return
        mode = self.app.resolve_mode(controls.mode, controls.scale, self.lesson)
        if mode is None:
            self.notify(f"Mode {controls.mode!r} needs a CUDA GPU and none is visible; "
                        "choose auto, cpu or sim.", severity="error")
            return
        gpu_memory = None
        if controls.gpu_memory_text:
            try:
                gpu_memory = parse_size(controls.gpu_memory_text)
            except ValueError:
                self.notify(f"Virtual GPU size {controls.gpu_memory_text!r} is not {SIZE_HELP}.",
                            severity="error")
                return
        plan = RunPlan(variants, mode, controls.scale, gpu_memory, controls.mode)
        if mode == "cpu" and controls.scale == "seed":
            def confirmed(yes: bool | None) -> None:
                if yes:
                    self._start(plan, self.app.runner)

            self.app.push_screen(ConfirmScreen(
                "cpu at seed scale runs the full-size experiment on your CPU: it can take many "
                "minutes and needs as much memory as the GPU would. sim gives the exact bytes "
                "at seed scale in seconds. Run on the CPU anyway?"), confirmed)
            return
        self._start(plan, self.app.runner)

    # ---- the run -------------------------------------------------------------------------------
    def _start(self, plan: RunPlan, runner) -> None:
        self.running = True
        self.plan = plan
        self._cancel = threading.Event()
        self._spark, self._finished, self._live = [], [], {}
        self.query_one(RunControls).set_running(True)
        status = self.query_one(RunStatus)
        status.start()
        status.running(Text("Starting…", style="bold"))
        self.query_one(TabbedContent).active = "results"
        self._draw_live()
        self.run_variants(plan, runner)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def run_variants(self, plan: RunPlan, runner) -> None:
        worker = get_current_worker()
        self.post_message(RunStarted(plan))
        cancel, total = self._cancel, len(plan.variants)
        reqs = [RunRequest(lesson_path=str(self.lesson.path), variant=variant, mode=plan.mode,
                           scale=plan.scale, gpu_memory=plan.gpu_memory,
                           timeout_s=self.lesson.timeout_s,
                           ranks=self.lesson.ranks(plan.scale, plan.mode)) for variant in plan.variants]
        results = run_all(  # the one run loop (lab.runner.loop): "queued" first, then the worker's
            runner, reqs, jobs=1, cancel=cancel, stop=lambda: worker.is_cancelled, announce=True,
            on_event=lambda pos, msg: self.post_message(
                RunProgress(plan.variants[pos], pos, total, msg)),
            on_result=lambda pos, result: self.post_message(VariantFinished(result, pos, total)))
        self.post_message(RunFinished(plan, results, cancelled=cancel.is_set()))

    def on_run_progress(self, message: RunProgress) -> None:
        ev, kind, name = message.event, message.event.get("type"), message.variant
        if kind in ("queued", "started"):
            code = self.query_one(CodeView)
            if code.marked != name:
                code.mark(name)
                self.describe_variant(name)
        live = self._live.setdefault(name, {"x": [], "y": [], "phases": [], "pending": []})
        if kind == "queued":
            self._spark, self._last = [], {}
            self.query_one(RunStatus).start()
        if kind == "phase":  # it starts at the next sample's event count (phases carry none)
            live["pending"].append(ev.get("name") or "")
        if kind == "sample" and ev.get("events") is not None:
            at = max(int(ev["events"]), live["x"][-1] if live["x"] else 0)
            live["phases"] += [(p, at) for p in live["pending"]]
            live["pending"] = []
            live["x"].append(at)
            live["y"].append(int(ev.get("live_bytes") or 0))
            self._live_dirty = True
        if kind in ("phase", "sample"):
            self._last = {"phase": ev.get("phase") or ev.get("name"), "live": ev.get("live_bytes")}
            if ev.get("live_bytes") is not None:
                self._spark.append(float(ev["live_bytes"]))
        self._say_progress(message, kind)

    def _say_progress(self, message: RunProgress, kind) -> None:
        color = variant_color(variant_index(self.lesson, message.variant))
        verb = ("▶ instructor's run: " if self.plan and self.plan.how == CLASS else
                "▶ H200 recording: " if self.plan and self.plan.recorded else "▶ ")
        text = Text.assemble((verb, "bold"), (message.variant, f"bold {color}"),
                             f" ({message.position + 1}/{message.total})")
        if kind == "queued":
            text.append(" · starting worker…" if not self.plan.recorded else " · loading…",
                        style="dim")
        ev = message.event
        if kind == "status" and ev.get("text"):  # the runner service: "waiting for GPU 0 —
            waiting = ev.get("stage") == "waiting"  # 2 ahead", "starting a worker", …
            text.append(f" · {ev['text']}", style="bold yellow" if waiting else "dim")
        phase, live = self._last.get("phase"), self._last.get("live")
        if phase:
            text.append(" · phase ", style="dim")
            text.append(str(phase), style="bold")
        if live is not None:
            text.append(" · live ", style="dim")
            text.append(size(live), style="bold")
        text.append("  Esc cancels" if not self._cancel.is_set() else "  cancelling…",
                    style="dim")
        self.query_one(RunStatus).running(text, self._spark)

    def on_variant_finished(self, message: VariantFinished) -> None:
        r = message.result
        self._finished.append(r)
        self._live.pop(r.variant, None)
        self._live_dirty = True
        if self.plan and self.plan.recorded:
            return  # a recording is not a run of yours: no history, no run count
        rec = self.app.progress.record_run(r, gpu_memory=self.plan.gpu_memory if self.plan else None)
        records = self.app.last_records.setdefault(self.lesson.id, [])
        if message.position == 0:
            records.clear()
        records.append(rec)
        if r.status == "error":
            self.notify(f"{r.variant}: {r.error}", title="Run failed", severity="error", timeout=8)
        elif r.status == "oom":
            self.notify(f"{r.variant} ran out of memory — see Results.", title="Out of memory",
                        severity="warning", timeout=6)

    def on_run_finished(self, message: RunFinished) -> None:
        self.running = False
        self.finished_runs += 1
        self.query_one(RunControls).set_running(False)
        status = self.query_one(RunStatus)
        status.stop()
        plan = message.plan
        if message.results:
            new = ResultSet(list(message.results), plan.how or (RECORDING if plan.recorded else LIVE))
            if plan.recorded or self.app.device_state == "cuda" or not self.main_is_recording():
                self.lead = new
                if self.app.device_state == "cuda" and not plan.recorded:
                    self.beside = self.recording_set()
            else:  # run it yourself, beside the recording
                self.beside = new
                if not self.lead:
                    self.lead = self.recording_set()
            self.restored = None
            self.app.last_sets[self.lesson.id] = (self.lead, self.beside)
            save_sets(self.app.progress, self.lesson.id, self.lead, self.beside)
        self._live = {}
        self.show_results()
        words = ", ".join(f"{r.variant} {STATUS_LABEL.get(r.status, r.status)}"
                          for r in message.results) or "nothing ran"
        head = "Cancelled" if message.cancelled else (
            "Played back" if plan.recorded else "Done")
        tail = " · 1 the lesson's story · 4 inspector"
        if self.main_is_recording():
            tail = " · y runs it yourself" + tail
        status.say(Text.assemble((f"{head}: ", "bold"), words, (tail, "dim")))
        self.app.refresh_home()

    def recording_set(self) -> ResultSet:
        refs = self.app.references(self.lesson.id)
        return ResultSet([refs[v] for v in self.recorded_variants()], RECORDING)

    def _draw_live(self) -> None:
        """The Results tab during a run: finished variants and the running one's timeline."""
        self._live_dirty = False
        if not self.running or self.plan is None:
            return
        lesson = self.lesson
        partial = [Series(name, variant_rgb(variant_index(lesson, name)), d["x"], d["y"],
                          d["phases"])
                   for name, d in self._live.items() if d["x"]]
        what = ("Playing back your instructor's run" if self.plan.how == CLASS else
                "Playing back the H200 recording (recorded on an NVIDIA H200, not run on this "
                "machine)" if self.plan.recorded else
                f"Running on this machine: {self.plan.mode}, {self.plan.scale} scale")
        self.query_one(ResultsView).show_live(lesson, Text(f"▶ {what}…", style="bold"),
                                              ResultSet(list(self._finished), self.plan.how or (
                                                  RECORDING if self.plan.recorded else LIVE)),
                                              partial,
                                              self.live_capacity())

    def live_capacity(self) -> tuple[int, str] | None:
        plan = self.plan
        cap = plan.gpu_memory if plan else None
        if plan is not None and plan.recorded:
            refs = self.app.references(self.lesson.id)
            cap = next((r.device.virtual_bytes for r in refs.values() if r.device.virtual_bytes),
                       None)
        elif cap is None and plan is not None:
            cap = self.lesson.scales.get(plan.scale, {}).get("gpu_memory")
        if not cap and plan is not None and plan.mode == "cuda" and not plan.recorded:
            total = getattr(self.app.gpu, "total_bytes", None)  # your GPU's own size
            if total:
                return int(total), f"{getattr(self.app.gpu, 'name', 'GPU')} capacity {size(total)}"
        if cap:
            gib = f" ({cap // 2**30} GiB)" if cap % 2**30 == 0 else ""
            return int(cap), f"GPU capped at {size(cap)}{gib}"
        return None

    def action_cancel_or_back(self) -> None:
        if self.running:
            self._cancel.set()
            self.query_one(RunStatus).say(Text("Cancelling… (stopping the worker)", style="yellow"))
        else:
            self.app.action_home()


__all__ = ["LessonRunMixin"]
