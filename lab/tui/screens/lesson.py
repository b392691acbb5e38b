"""`LessonScreen`: read, predict, run (or play the H200 recording), look, inspect, answer.

The text tab shows `Lesson.text_before` until a result is on screen, then the measured story
(`text_after`) too. Before any result, nothing from a recording is shown (the predict-the-peak
answer would be on screen). Running lives in `lesson_run.LessonRunMixin`; this module lays
the screen out, shows results and moves between tabs and lessons.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Static, TabbedContent, TabPane

from lab.curriculum import Lesson, Question

from ..look import variant_color
from ..messages import RunPlan
from ..provenance import RECORDING, version_mismatch
from ..widgets import CodeView, InspectorView, QuizView, ResultsData, ResultsView, RunControls
from ..widgets.status import RunStatus
from ..widgets.tables import ResultSet, variant_index
from .lesson_run import LessonRunMixin
from .lesson_store import load_sets

TABS = ("text", "experiment", "results", "inspector", "quiz")


def lesson_markdown(lesson: Lesson, revealed: bool) -> str:
    objectives = "\n".join(f"- {o}" for o in lesson.objectives)
    variants = "\n".join(f"- **{v.name}** — {v.title}. {v.description}" for v in lesson.variants)
    body = lesson.text_before.strip()
    if body.lstrip("# ").strip().lower() == "placeholder":
        body = ""
    after = lesson.text_after.strip()
    if after and revealed:
        body += "\n\n---\n\n" + after
    elif after:
        body += ("\n\n---\n\n*What the run measured, and the take-away, appear here once you "
                 "have seen the result (press **r**).*")
    return (f"# {lesson.key} · {lesson.title}\n\n{lesson.summary}\n\n## You will\n\n{objectives}\n\n"
            f"## The experiment\n\n{variants}\n\nOpen **Experiment** (key `2`) to read the code, "
            f"then press **r** to run it.\n\n{body}\n")


class LessonScreen(LessonRunMixin, Screen):
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("y", "run_yourself", "Run it yourself"),
        Binding("escape", "cancel_or_back", "Cancel/Back"),
        Binding("n", "next_lesson", "Next"),
        Binding("p", "prev_lesson", "Prev", show=False),
        Binding("s", "recorded_snapshot", "H200 snapshot", show=False),
        Binding("full_stop,comma", "typed_number", show=False),
        *[Binding(str(i + 1), f"tab('{t}')", t.capitalize(), show=False) for i, t in enumerate(TABS)],
    ]

    def __init__(self, lesson: Lesson):
        super().__init__(name=lesson.id)
        self.lesson = lesson
        self.lead, self.beside = ResultSet(), ResultSet()
        self.restored: str | None = None
        self.plan: RunPlan | None = None
        self.running = False
        self.finished_runs = 0  # how many runs this screen has completed (tests wait on it)
        self._cancel = threading.Event()
        self._spark: list[float] = []
        self._finished: list = []
        self._live: dict = {}
        self._live_dirty = False
        self._stale: set[str] = set()
        self._last: dict = {}  # last phase / live bytes streamed by the running variant

    @property
    def results(self):  # the main results on screen (tests and the inspector read them)
        return self.lead.results

    @property
    def predict_question(self) -> Question | None:
        return next((q for q in self.lesson.quiz if q.kind == "predict_peak"), None)

    # ---- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        lesson = self.lesson
        yield Header()
        with TabbedContent(initial="text", id="tabs"):
            with TabPane("1 Lesson", id="text"):
                with VerticalScroll(id="text-scroll"):
                    # Rich's Markdown in one Static: one DOM node instead of hundreds, so
                    # switching tabs never restyles the lesson text (keeps the UI responsive)
                    yield Static("", id="lesson-md")
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
        app = self.app
        app.progress.visit(self.lesson.id)
        self.query_one(CodeView).mark(self.lesson.variants[0].name, scroll=False)
        self.describe_variant(self.lesson.variants[0].name)
        lp = app.progress.lessons.get(self.lesson.id)
        if lp:
            self.query_one(QuizView).restore(lp.quiz)
        if self.lesson.id in app.last_sets:
            self.lead, self.beside = app.last_sets[self.lesson.id]
        else:
            lead, beside, saved = load_sets(app.progress, self.lesson.id, app.reference_root)
            if lead:
                self.lead, self.beside = lead, beside
                self.restored = f"from your last session ({saved[:16].replace('T', ' ')})"
                app.last_sets[self.lesson.id] = (lead, beside)
        self.refresh_prediction()
        self.show_results()
        self.idle_status()
        self.set_interval(0.25, self._live_tick)
        self.watch(app, "device_state", self._device_changed, init=False)

    def _live_tick(self) -> None:
        if self._live_dirty and self.running:
            self._draw_live()

    def _device_changed(self, _state: str) -> None:
        controls = self.query_one(RunControls)
        controls.set_auto_label(self._auto_label(controls.scale))
        self.refresh_bindings()
        self.show_results()
        self.idle_status()

    def _auto_label(self, scale: str) -> str:
        return self.app.resolve_mode("auto", scale, self.lesson) or "?"

    def check_action(self, action: str, parameters) -> bool | None:
        if action == "run_yourself":
            return self.main_is_recording()  # otherwise r does the same: keep the footer short
        return True

    def describe_variant(self, name: str) -> None:
        v = self.lesson.variant(name)
        i = variant_index(self.lesson, name)
        self.query_one("#variant-info", Static).update(Text.assemble(
            (f"■ {v.name}", f"bold {variant_color(i)}"), f" — {v.title}. ", (v.description, "dim")))

    def idle_status(self) -> None:
        text = Text("Ready. ", style="bold")
        self.query_one(RunControls).set_idle_label(
            "▶ Run yourself" if self.main_is_recording() else "▶ Run")
        if self.main_is_recording():
            controls = self.query_one(RunControls)
            mode = self.app.resolve_mode(controls.mode, controls.scale, self.lesson)
            text.append("r plays the H200 recording · y runs it yourself "
                        f"({mode}, {controls.scale} scale) · ? help", style="dim")
        else:
            text.append("r runs every checked variant · Esc cancels a run · ? help", style="dim")
        self.query_one(RunStatus).say(text)

    def refresh_prediction(self) -> None:
        lp = self.app.progress.lessons.get(self.lesson.id)
        q = self.predict_question
        if q is None:
            return
        controls = self.query_one(RunControls)
        if lp and lp.prediction_gb is not None:
            self.query_one(QuizView).commit_prediction(lp.prediction_gb)
            controls.show_prediction(Text.assemble(
                ("your prediction: ", "dim"), (f"{lp.prediction_gb:g} GB", "bold"),
                (f" for the {q.variant} peak ({q.scale} scale), committed", "dim")))
        elif lp and lp.revealed_at:
            controls.show_prediction(Text("no prediction made before the result was shown",
                                          style="dim"))
        else:
            controls.show_prediction(Text(f"r asks you to predict the {q.variant} peak "
                                          f"({q.scale} scale) first", style="dim"))

    # ---- showing -----------------------------------------------------------------------------
    def revealed(self) -> bool:
        lp = self.app.progress.lessons.get(self.lesson.id)
        return bool(self.lead) or bool(lp and lp.revealed_at)

    def show_results(self) -> None:
        app = self.app
        q = self.predict_question
        if self.lead:
            truth = None
            for rs in (self.lead, self.beside):
                r = rs.get(q.variant) if (q and rs) else None
                if truth is None and r is not None and r.ok and r.scale == q.scale:
                    truth = (r.peak.bytes / 1e9, rs.source.short)
            app.progress.reveal(self.lesson.id, *(truth or (None, "")))
        lp = app.progress.lessons.get(self.lesson.id)
        recording = next((rs.results[0] for rs in (self.lead, self.beside)
                          if rs and rs.how == RECORDING), None)
        data = ResultsData(
            lesson=self.lesson, lead=self.lead, beside=self.beside,
            prediction_gb=lp.prediction_gb if lp else None,
            prediction_question=(q.variant, q.scale) if q else None,
            prediction_late=bool(lp and lp.prediction_late),
            history=[h for h in app.progress.history_for(self.lesson.id)
                     if not any(h is mine for mine in app.last_records.get(self.lesson.id, []))],
            versions=version_mismatch(recording) if recording else None,
            restored=self.restored)
        self.query_one(ResultsView).show(data, self._empty_hint())
        self.query_one("#lesson-md", Static).update(
            RichMarkdown(lesson_markdown(self.lesson, self.revealed())))
        self.refresh_prediction()
        self.refresh_bindings()
        # the other tabs are brought up to date when they are shown: less layout work at once
        self._stale = {"inspector", "quiz"}
        self._refresh_tab(self.query_one(TabbedContent).active)

    def _empty_hint(self) -> Text:
        if self.main_is_recording():
            return Text.assemble(
                "No result yet. ", ("r", "bold"), " plays this lesson as recorded on an NVIDIA "
                "H200 (you have no CUDA GPU here: the recording is the real thing); ",
                ("y", "bold"), " runs it yourself on this machine (simulated at full size, or "
                "for real on the CPU at small scale). Predict first: r asks.", style="dim")
        return Text.assemble("No results yet. Press ", ("r", "bold"), " to run every checked "
                             "variant; results appear here as they arrive.", style="dim")

    def _refresh_tab(self, tab: str) -> None:
        if tab not in self._stale:
            return
        self._stale.discard(tab)
        if tab == "inspector":
            self.query_one(InspectorView).show(
                self.lesson, self.lead.results, self.lead.source.short if self.lead else "")
        elif tab == "quiz":
            measured = {}
            for rs in (self.beside, self.lead):  # the lead wins
                for r in rs.results:
                    if r.ok:
                        measured[(r.variant, r.scale)] = (r.peak.bytes, rs.source.short)
            self.query_one(QuizView).set_measured(measured)

    # ---- navigation --------------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        tabs = self.query_one(TabbedContent)
        self._last_tab_key = (time.monotonic(), TABS.index(tab) + 1, tabs.active)
        tabs.active = tab

    def action_typed_number(self) -> None:
        """"4" then "." is someone typing a prediction (4.4), not asking for tab 4: go back to
        the tab they were on and open the prediction box with "4." in it."""
        when, digit, before = getattr(self, "_last_tab_key", (0.0, 0, ""))
        lp = self.app.progress.lessons.get(self.lesson.id)
        pending = self.predict_question is not None and not (
            lp and (lp.prediction_gb is not None or lp.revealed_at))
        if not pending or time.monotonic() - when > 2.0 or self.running:
            return
        self.query_one(TabbedContent).active = before
        self._ask_prediction(self._play_recording if self.main_is_recording() else self._run_live,
                             prefill=f"{digit}.")

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

    def action_recorded_snapshot(self) -> None:
        """Open the H200's allocator snapshot of the inspector's (or the first) variant."""
        variant = self.query_one(InspectorView).variant or self.lesson.variants[0].name
        folder = Path(self.app.reference_root) / self.lesson.id
        path = folder / f"{variant}.profile.pkl.gz"
        if not path.is_file():
            found = sorted(folder.glob("*.profile.pkl.gz")) if folder.is_dir() else []
            if not found:
                self.notify("No recorded H200 allocator snapshot for this lesson in this "
                            "install yet.", severity="warning")
                return
            path = found[0]
        self.app.load_snapshot(str(path))

    # ---- messages up from widgets ------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            event.stop()
            self.action_run_yourself() if self.main_is_recording() else self.action_run()

    def on_checkbox_changed(self, event) -> None:
        name = (event.checkbox.id or "").removeprefix("v-")
        if event.value and not self.running and name:
            self.query_one(CodeView).mark(name)
            self.describe_variant(name)

    def on_select_changed(self, event) -> None:
        if event.select.id == "scale":
            controls = self.query_one(RunControls)
            controls.set_auto_label(self._auto_label(controls.scale))
            self.idle_status()

    def on_quiz_view_answered(self, message: QuizView.Answered) -> None:
        progress, lesson = self.app.progress, self.lesson
        if lesson.quiz[message.index].kind == "predict_peak":
            progress.commit_prediction(lesson.id, float(message.answer))
            self.refresh_prediction()
        progress.record_answer(lesson.id, message.index, message.answer, message.correct,
                               len(lesson.quiz))
        status = progress.status(lesson.id)
        if status in ("quiz passed", "quiz done"):
            right, total = progress.lessons[lesson.id].quiz_score
            self.notify(f"Quiz done: {right}/{total} correct" + (" ✔" if right == total else ""),
                        severity="information")
        self.app.refresh_home()


__all__ = ["LessonScreen", "lesson_markdown"]
