"""`LessonScreen`: read, run, look at the results, inspect, answer the quiz.

Run: every selected variant goes through the injected runner, one after another, in a thread
worker (exclusive, group "experiment"). The worker only posts messages; this screen updates
widgets. Esc sets the cancel event, which the runner honours by killing the worker process.
"""

from __future__ import annotations

import threading

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import (Button, Footer, Header, Sparkline, Static, TabbedContent, TabPane)
from textual.worker import get_current_worker

from lab.curriculum import Lesson
from lab.measure.result import RunResult
from lab.runner.loop import run_all
from lab.runner.protocol import RunRequest

from ..look import STATUS_LABEL, gb, variant_color
from ..classroom import play_class_run
from ..messages import RunFinished, RunPlan, RunProgress, RunStarted, VariantFinished
from ..widgets import CodeView, InspectorView, QuizView, ResultsData, ResultsView, RunControls
from ..widgets.quiz import parse_gb
from ..widgets.results import variant_index

TABS = ("text", "experiment", "results", "inspector", "quiz")


def lesson_markdown(lesson: Lesson) -> str:
    objectives = "\n".join(f"- {o}" for o in lesson.objectives)
    variants = "\n".join(f"- **{v.name}** — {v.title}. {v.description}" for v in lesson.variants)
    body = lesson.markdown.strip()
    if body.lstrip("# ").strip().lower() == "placeholder":
        body = ""
    return (f"# {lesson.key} · {lesson.title}\n\n{lesson.summary}\n\n## You will\n\n{objectives}\n\n"
            f"## The experiment\n\n{variants}\n\nOpen **Experiment** (key `2`) to read the code, "
            f"then press **r** to run it.\n\n{body}\n")


class StatusText(Widget):
    """One line of text. `say()` repaints without a layout pass (it changes ~10×/s in a run)."""

    DEFAULT_CSS = "StatusText { width: 1fr; height: 1; }"

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.text: Text | str = ""

    def render(self) -> Text | str:
        return self.text

    @property
    def content(self):  # the same accessor as Static, for tests
        return self.text

    def say(self, text: Text | str) -> None:
        self.text = text
        self.refresh()


class RunStatus(Horizontal):
    DEFAULT_CSS = """
    RunStatus { height: 1; background: $panel; padding: 0 1; }
    RunStatus > Sparkline { width: 24; display: none; }
    RunStatus.-running > Sparkline { display: block; }
    """

    def compose(self) -> ComposeResult:
        yield StatusText(id="status-text")
        yield Sparkline([], id="status-spark")

    def say(self, text: Text | str) -> None:
        self.query_one("#status-text", StatusText).say(text)


class LessonScreen(Screen):
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("escape", "cancel_or_back", "Cancel/Back"),
        Binding("n", "next_lesson", "Next"),
        Binding("p", "prev_lesson", "Prev"),
        *[Binding(str(i + 1), f"tab('{t}')", t.capitalize(), show=False) for i, t in enumerate(TABS)],
    ]

    def __init__(self, lesson: Lesson):
        super().__init__(name=lesson.id)
        self.lesson = lesson
        self.results: list[RunResult] = []
        self.plan: RunPlan | None = None
        self.running = False
        self.finished_runs = 0  # how many runs this screen has completed (tests wait on it)
        self._cancel = threading.Event()
        self._spark: list[float] = []
        self._stale: set[str] = set()
        self._last: dict = {}  # last phase / live bytes streamed by the running variant

    # ---- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        lesson = self.lesson
        yield Header()
        with TabbedContent(initial="text", id="tabs"):
            with TabPane("1 Lesson", id="text"):
                with VerticalScroll(id="text-scroll"):
                    # Rich's Markdown in one Static: one DOM node instead of hundreds, so
                    # switching tabs never restyles the lesson text (keeps the UI responsive)
                    yield Static(RichMarkdown(lesson_markdown(lesson)), id="lesson-md")
            with TabPane("2 Experiment", id="experiment"):
                with Vertical():
                    yield RunControls(lesson, self._auto_label("seed"), "seed", id="controls")
                    yield Static("", id="variant-info")
                    yield CodeView(lesson.code, id="code-view")
            with TabPane("3 Results", id="results"):
                yield ResultsView(id="results-view")
            with TabPane("4 Inspector", id="inspector"):
                yield InspectorView(id="inspector-view")
            with TabPane("5 Quiz", id="quiz"):
                yield QuizView(lesson, id="quiz-view")
        yield RunStatus(id="run-status")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "GPU Memory Lab"
        self.sub_title = f"{self.lesson.key} · {self.lesson.title}"
        self.app.progress.visit(self.lesson.id)
        self.query_one(CodeView).mark(self.lesson.variants[0].name, scroll=False)
        self._describe_variant(self.lesson.variants[0].name)
        quiz = self.query_one(QuizView)
        lp = self.app.progress.lessons.get(self.lesson.id)
        if lp:
            quiz.restore(lp.quiz)
            if lp.prediction_gb is not None:
                for box in self.query("#predict"):
                    box.value = f"{lp.prediction_gb:g}"
        self.results = list(self.app.last_results.get(self.lesson.id, []))
        self._show_results()
        self._idle_status()
        self.watch(self.app, "device_state", self._device_changed, init=False)

    def _device_changed(self, _state: str) -> None:
        controls = self.query_one(RunControls)
        controls.set_auto_label(self._auto_label(controls.scale))
        self._show_results()
        self._idle_status()

    def _auto_label(self, scale: str) -> str:
        return self.app.resolve_mode("auto", scale, self.lesson) or "?"

    def _describe_variant(self, name: str) -> None:
        v = self.lesson.variant(name)
        i = variant_index(self.lesson, name)
        self.query_one("#variant-info", Static).update(Text.assemble(
            (f"■ {v.name}", f"bold {variant_color(i)}"), f" — {v.title}. ", (v.description, "dim")))

    def _idle_status(self) -> None:
        text = Text("Ready. ", style="bold")
        text.append("r runs every checked variant · Esc cancels a run · ? help", style="dim")
        self.query_one(RunStatus).say(text)

    # ---- running -----------------------------------------------------------------------------
    def action_run(self) -> None:
        if self.running:
            self.notify("A run is already in progress (Esc cancels it).", severity="warning")
            return
        controls = self.query_one(RunControls)
        variants = controls.selected_variants()
        if not variants:
            self.notify("Check at least one variant to run.", severity="warning")
            return
        mode = self.app.resolve_mode(controls.mode, controls.scale, self.lesson)
        if mode is None:
            self.notify(f"Mode {controls.mode!r} needs a CUDA GPU and none is visible; "
                        "choose auto, cpu or sim.", severity="error")
            return
        prediction = controls.prediction_text
        if prediction:
            value = parse_gb(prediction)
            if value is None:
                self.notify(f"Prediction {prediction!r} is not a number of GB (e.g. 4.4).",
                            severity="error")
                return
            self.app.progress.set_prediction(self.lesson.id, value)
            self.query_one(QuizView).prefill_prediction(value)
        if play_class_run(self):  # a served workshop: the instructor's run is the result
            return
        self.running = True
        self._cancel = threading.Event()
        self._spark = []
        controls.set_running(True)
        self.query_one(RunStatus).add_class("-running")
        self.query_one(RunStatus).say(Text("Starting…", style="bold"))
        self.run_variants(variants, controls.mode, mode, controls.scale, controls.gpu_memory_text)

    @work(thread=True, exclusive=True, group="experiment", exit_on_error=False)
    def run_variants(self, variants: tuple[str, ...], requested: str, mode: str, scale: str,
                     gpu_text: str) -> None:
        worker = get_current_worker()
        gpu_memory = None
        if gpu_text:
            from lab.measure.device import SIZE_HELP, parse_size  # torch import: off the UI thread

            try:
                gpu_memory = parse_size(gpu_text)
            except ValueError:
                plan = RunPlan(variants, mode, scale, None, requested)
                self.post_message(RunFinished(plan, [], cancelled=False))
                self.app.call_from_thread(
                    self.notify, f"Virtual GPU size {gpu_text!r} is not {SIZE_HELP}.",
                    severity="error")
                return
        plan = RunPlan(variants, mode, scale, gpu_memory, requested)
        self.post_message(RunStarted(plan))
        runner, cancel = self.app.runner, self._cancel
        total = len(variants)
        reqs = [RunRequest(lesson_path=str(self.lesson.path), variant=variant, mode=mode,
                           scale=scale, gpu_memory=gpu_memory, timeout_s=self.lesson.timeout_s)
                for variant in variants]
        results = run_all(  # the one run loop (lab.runner.loop): "queued" first, then the worker's
            runner, reqs, jobs=1, cancel=cancel, stop=lambda: worker.is_cancelled, announce=True,
            on_event=lambda pos, msg: self.post_message(RunProgress(variants[pos], pos, total, msg)),
            on_result=lambda pos, result: self.post_message(VariantFinished(result, pos, total)))
        self.post_message(RunFinished(plan, results, cancelled=cancel.is_set()))

    def on_run_started(self, message: RunStarted) -> None:
        self.plan = message.plan

    def on_run_progress(self, message: RunProgress) -> None:
        ev = message.event
        kind = ev.get("type")
        if kind in ("queued", "started"):
            code = self.query_one(CodeView)
            if code.marked != message.variant:
                code.mark(message.variant)
                self._describe_variant(message.variant)
            if kind == "queued":
                self._spark = []
                self._last = {}
        # a sample or phase event updates what is shown; the others keep the last known values
        if kind in ("phase", "sample"):
            self._last = {"phase": ev.get("phase") or ev.get("name"), "live": ev.get("live_bytes")}
        live = self._last.get("live") if kind != "queued" else None
        if live is not None and kind in ("phase", "sample"):
            self._spark.append(float(live))
            self.query_one("#status-spark", Sparkline).data = self._spark[-48:]
        color = variant_color(variant_index(self.lesson, message.variant))
        text = Text.assemble(("▶ ", "bold"), (message.variant, f"bold {color}"),
                             f" ({message.position + 1}/{message.total})")
        phase = self._last.get("phase") if kind != "queued" else None
        if kind == "queued":
            text.append(" · starting worker…", style="dim")
        if kind == "status" and ev.get("text"):  # the runner service: "waiting for GPU 0 —
            waiting = ev.get("stage") == "waiting"  # 2 ahead", "starting worker", …
            text.append(f" · {ev['text']}", style="bold yellow" if waiting else "dim")
        if phase:
            text.append(" · phase ", style="dim")
            text.append(str(phase), style="bold")
        if live is not None:
            text.append(" · live ", style="dim")
            text.append(gb(live), style="bold")
        text.append("  (Esc cancels)" if not self._cancel.is_set() else "  cancelling…", style="dim")
        self.query_one(RunStatus).say(text)

    def on_variant_finished(self, message: VariantFinished) -> None:
        r = message.result
        rec = self.app.progress.record_run(r, gpu_memory=self.plan.gpu_memory if self.plan else None)
        if message.position == 0:
            self.app.last_records[self.lesson.id] = []
        self.app.last_records.setdefault(self.lesson.id, []).append(rec)
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
        status.remove_class("-running")
        if message.results:
            self.results = message.results
            self.app.last_results[self.lesson.id] = message.results
            self._show_results()
            self.query_one(TabbedContent).active = "results"
        words = ", ".join(f"{r.variant} {STATUS_LABEL.get(r.status, r.status)}"
                          for r in message.results) or "nothing ran"
        head = "Cancelled" if message.cancelled else "Done"
        status.say(Text.assemble((f"{head}: ", "bold"), words,
                                 ("  · r runs again · 3 results · 4 inspector", "dim")))
        self.app.refresh_home()

    def action_cancel_or_back(self) -> None:
        if self.running:
            self._cancel.set()
            self.query_one(RunStatus).say(Text("Cancelling… (stopping the worker)", style="yellow"))
        else:
            self.app.action_home()

    def on_unmount(self) -> None:
        self._cancel.set()  # leaving the screen stops its run

    # ---- showing -----------------------------------------------------------------------------
    def _show_results(self) -> None:
        app = self.app
        predict = next((q for q in self.lesson.quiz if q.kind == "predict_peak"), None)
        lp = app.progress.lessons.get(self.lesson.id)
        data = ResultsData(
            lesson=self.lesson, results=self.results,
            references=app.references(self.lesson.id),
            prediction_gb=lp.prediction_gb if lp else None,
            prediction_question=(predict.variant, predict.scale) if predict else None,
            history=[h for h in app.progress.history_for(self.lesson.id)
                     if not any(h is mine for mine in app.last_records.get(self.lesson.id, []))],
        )
        self.query_one(ResultsView).show(data if (self.results or data.references) else None)
        # the other tabs are brought up to date when they are shown: less layout work at once
        self._stale = {"inspector", "quiz"}
        self._refresh_tab(self.query_one(TabbedContent).active)

    def _refresh_tab(self, tab: str) -> None:
        if tab not in self._stale:
            return
        self._stale.discard(tab)
        if tab == "inspector":
            self.query_one(InspectorView).show(self.lesson, self.results)
        elif tab == "quiz":
            self.query_one(QuizView).set_measured(
                {(r.variant, r.scale): (r.peak.bytes, r.mode) for r in self.results if r.ok})

    # ---- navigation --------------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._refresh_tab(event.pane.id)
        focus = {"inspector": InspectorView, "results": ResultsView, "quiz": QuizView,
                 "text": "#text-scroll", "experiment": CodeView}.get(event.pane.id)
        if focus is not None:
            self.query_one(focus).focus()
        if event.pane.id == "experiment":
            code = self.query_one(CodeView)
            code.mark(code.marked)

    def _guard(self) -> bool:
        if self.running:
            self.notify("A run is in progress: Esc cancels it first.", severity="warning")
            return False
        return True

    def action_next_lesson(self) -> None:
        if self._guard():
            self.app.open_lesson_offset(self.lesson, +1)

    def action_prev_lesson(self) -> None:
        if self._guard():
            self.app.open_lesson_offset(self.lesson, -1)

    # ---- messages up from widgets ------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            event.stop()
            self.action_run()

    def on_checkbox_changed(self, event) -> None:
        name = (event.checkbox.id or "").removeprefix("v-")
        if event.value and not self.running and name:
            self.query_one(CodeView).mark(name)
            self._describe_variant(name)

    def on_select_changed(self, event) -> None:
        if event.select.id == "scale":
            controls = self.query_one(RunControls)
            controls.set_auto_label(self._auto_label(controls.scale))

    def on_quiz_view_answered(self, message: QuizView.Answered) -> None:
        self.app.progress.record_answer(self.lesson.id, message.index, message.answer,
                                        message.correct, len(self.lesson.quiz))
        if self.app.progress.status(self.lesson.id) == "quiz passed":
            self.notify("Quiz passed ✔", severity="information")
        self.app.refresh_home()
