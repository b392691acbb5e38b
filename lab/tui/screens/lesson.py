"""`LessonScreen`: read, predict, run (or play the H200 recording), look, inspect, answer.

The text tab shows `Lesson.text_before` until a result is on screen, then the measured story
(`text_after`) too. Before any result, nothing from a recording is shown (the predict-the-peak
answer would be on screen). The screen holds one immutable `LessonRun` state (the headless model,
lab/tui/lesson_model.py) and renders it; running lives in `lesson_run.LessonRunMixin`; this
module lays the screen out, shows results and moves between tabs and lessons. Everything it
needs comes in through `LessonDeps` (lab/tui/session.py), not from the app.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Static, TabbedContent, TabPane

from lab.course.curriculum import Lesson, Question
from lab.course.progress import QUIZ_DONE, QUIZ_PASSED

from ..lesson_model import LessonRun, Restored, fold, idle_words
from ..look import variant_color
from ..provenance import code_path_line
from ..session import LessonDeps
from ..widgets import CodeView, InspectorView, QuizView, ResultsData, ResultsView, RunControls
from ..widgets.lesson_text import LessonText
from ..widgets.status import RunStatus
from ..widgets.tables import variant_index
from .lesson_run import LessonRunMixin
from .lesson_store import load_sets

TABS = ("text", "experiment", "results", "inspector", "quiz")
HEADER_MARGIN = 20  # the header's icon (8) and clock space (10) either side of the title


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


def header_titles(lesson: Lesson, width: int, app_title: str = "GPU Memory Lab") -> tuple[str, str]:
    """(title, sub_title) for the header at `width`: the app's name and the lesson when they
    fit; else the lesson alone; else its title up to the colon ("13 · Optimizer state"); else
    cut at a word with an ellipsis. Never cut mid-word, never overlapping the clock."""
    room = max(10, width - HEADER_MARGIN)
    full = f"{lesson.key} · {lesson.title}"
    if len(app_title) + 3 + len(full) <= room:
        return app_title, full
    if len(full) <= room:
        return full, ""
    short = f"{lesson.key} · {lesson.title.split(':')[0].strip()}"
    if len(short) <= room:
        return short, ""
    cut = short[:room - 1].rsplit(" ", 1)[0]
    return cut + "…", ""


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

    clock = staticmethod(time.monotonic)  # "4" then "." within 2 s is a number (tests freeze it)

    def __init__(self, lesson: Lesson, deps: LessonDeps):
        super().__init__(name=lesson.id)
        self.lesson = lesson
        self.deps = deps
        self.progress = deps.progress
        self.state = LessonRun.empty(v.name for v in lesson.variants)
        self.chosen = lesson.variants[0].name  # the variant the learner looks at: it runs first
        self._cancel = threading.Event()
        self._live_dirty = False
        self._stale: set[str] = set()

    def dispatch(self, event) -> LessonRun:
        """Fold one event into the screen's state (lab/tui/lesson_model.py)."""
        self.state = fold(self.state, event)
        return self.state

    # the state, as the classroom, the palette and the tests read it
    @property
    def running(self) -> bool:
        return self.state.running

    @property
    def finished_runs(self) -> int:
        return self.state.completed

    @property
    def plan(self):
        return self.state.plan

    @property
    def lead(self):
        return self.state.lead

    @property
    def beside(self):
        return self.state.beside

    @property
    def restored(self) -> str | None:
        return self.state.restored

    @property
    def results(self) -> list:  # the main results on screen (tests and the inspector read them)
        return list(self.state.lead.results)

    @property
    def predict_question(self) -> Question | None:
        return next((q for q in self.lesson.quiz if q.kind == "predict_peak"), None)

    # ---- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        lesson = self.lesson
        yield Header()
        with TabbedContent(initial="text", id="tabs"):
            with TabPane("1 Lesson", id="text"):
                yield LessonText(id="text-scroll")
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
        self._titles(self.app.size.width)
        self.progress.visit(self.lesson.id)
        self.query_one(CodeView).mark(self.lesson.variants[0].name, scroll=False)
        self.describe_variant(self.lesson.variants[0].name)
        lp = self.progress.lessons.get(self.lesson.id)
        if lp:
            self.query_one(QuizView).restore(lp.quiz)
        kept = self.deps.kept
        if self.lesson.id in kept.sets:
            self.dispatch(Restored(*kept.sets[self.lesson.id]))
        else:
            lead, beside, saved = load_sets(self.progress, self.lesson.id, self.deps.reference_root)
            if lead:
                self.dispatch(Restored(lead, beside, "from your last session "
                                                     f"({saved[:16].replace('T', ' ')})"))
                kept.sets[self.lesson.id] = (self.state.lead, self.state.beside)
        self.refresh_prediction()
        self.show_results()
        self.idle_status()
        self.set_interval(0.25, self._live_tick)
        self.watch(self.app, "device_state", self._device_changed, init=False)

    def on_resize(self, event) -> None:
        self._titles(event.size.width)

    def _titles(self, width: int) -> None:
        self.title, self.sub_title = header_titles(self.lesson, width)

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
        try:
            return self.deps.choose_mode("auto", scale, self.lesson.modes).mode
        except ValueError:
            return "?"

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
        controls = self.query_one(RunControls)
        recording = self.main_is_recording()
        controls.set_idle_label("▶ Run yourself" if recording else "▶ Run")
        mode = self._auto_label(controls.scale) if controls.mode == "auto" else controls.mode
        self.query_one(RunStatus).say(self.words(idle_words(recording, mode, controls.scale)))

    def refresh_prediction(self) -> None:
        lp = self.progress.lessons.get(self.lesson.id)
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
        lp = self.progress.lessons.get(self.lesson.id)
        return bool(self.lead) or bool(lp and lp.revealed_at)

    def show_results(self) -> None:
        progress, q, state = self.progress, self.predict_question, self.state
        if state.lead:
            truth = None
            for rs in (state.lead, state.beside):
                r = rs.get(q.variant) if (q and rs) else None
                if truth is None and r is not None and r.ok and r.scale == q.scale:
                    truth = (r.peak.bytes / 1e9, rs.source.short)
            progress.reveal(self.lesson.id, *(truth or (None, "")))
        lp = progress.lessons.get(self.lesson.id)
        mine, recording = state.mine, state.recording
        mine_now = self.deps.kept.records.get(self.lesson.id, [])
        data = ResultsData(
            lesson=self.lesson, lead=state.lead, beside=state.beside,
            prediction_gb=lp.prediction_gb if lp else None,
            prediction_question=(q.variant, q.scale) if q else None,
            prediction_late=bool(lp and lp.prediction_late),
            history=[h for h in progress.history_for(self.lesson.id)
                     if not any(h is m for m in mine_now)],
            versions=code_path_line(mine.results, recording.results) if mine and recording
            else None,
            restored=state.restored)
        self.query_one(ResultsView).show(data, self._empty_hint())
        self.query_one(LessonText).set_markdown(lesson_markdown(self.lesson, self.revealed()))
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
        lead, beside = self.state.lead, self.state.beside
        if tab == "inspector":
            self.query_one(InspectorView).show(
                self.lesson, lead.results, lead.source.short if lead else "")
        elif tab == "quiz":
            measured = {}
            for rs in (beside, lead):  # the lead wins
                for r in rs.results:
                    if r.ok:
                        measured[(r.variant, r.scale)] = (r.peak.bytes, rs.source.short)
            self.query_one(QuizView).set_measured(measured)

    # ---- navigation --------------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        tabs = self.query_one(TabbedContent)
        self._last_tab_key = (self.clock(), TABS.index(tab) + 1, tabs.active)
        self.show_tab(tab)

    def show_tab(self, tab: str) -> None:
        """Switch tabs without the focus pulling them back: a focused widget hidden with its
        pane hands the focus to a neighbour in that pane, whose pane then becomes the active
        one again (a Run button, a variant box). So the focus is let go first."""
        self.set_focus(None)
        tabs = self.query_one(TabbedContent)
        if tabs.active == tab:  # no TabActivated comes: focus its widget here
            self._focus_tab(tab)
        tabs.active = tab

    def _focus_tab(self, tab: str) -> None:
        focus = {"inspector": InspectorView, "results": ResultsView, "quiz": QuizView,
                 "text": LessonText, "experiment": CodeView}.get(tab)
        if focus is not None:
            self.query_one(focus).focus()

    def action_typed_number(self) -> None:
        """"4" then "." is someone typing a prediction (4.4), not asking for tab 4: go back to
        the tab they were on and open the prediction box with "4." in it."""
        when, digit, before = getattr(self, "_last_tab_key", (0.0, 0, ""))
        lp = self.progress.lessons.get(self.lesson.id)
        pending = self.predict_question is not None and not (
            lp and (lp.prediction_gb is not None or lp.revealed_at))
        if not pending or self.clock() - when > 2.0 or self.running:
            return
        self.show_tab(before)
        self._ask_prediction(self._play_recording if self.main_is_recording() else self._run_live,
                             prefill=f"{digit}.")

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._refresh_tab(event.pane.id)
        self._focus_tab(event.pane.id)
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
        folder = Path(self.deps.reference_root) / self.lesson.id
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

    def on_descendant_focus(self, event) -> None:
        # Tab onto a variant's box: its code (and the technique's) is shown, and it runs first
        name = (event.widget.id or "").removeprefix("v-")
        if (event.widget.id or "").startswith("v-") and not self.running and name != self.chosen:
            self.chosen = name
            self.query_one(CodeView).mark(name)
            self.describe_variant(name)

    def on_checkbox_changed(self, event) -> None:
        name = (event.checkbox.id or "").removeprefix("v-")
        if event.value and not self.running and name:
            self.chosen = name  # the variant looked at runs first
            self.query_one(CodeView).mark(name)
            self.describe_variant(name)

    def on_select_changed(self, event) -> None:
        if event.select.id == "scale":
            controls = self.query_one(RunControls)
            controls.set_auto_label(self._auto_label(controls.scale))
            self.idle_status()

    def on_quiz_view_answered(self, message: QuizView.Answered) -> None:
        progress, lesson = self.progress, self.lesson
        if lesson.quiz[message.index].kind == "predict_peak":
            progress.commit_prediction(lesson.id, float(message.answer))
            self.refresh_prediction()
        progress.record_answer(lesson.id, message.index, message.answer, message.correct,
                               len(lesson.quiz))
        status = progress.status(lesson.id)
        if status in (QUIZ_PASSED, QUIZ_DONE):
            right, total = progress.lessons[lesson.id].quiz_score
            self.notify(f"Quiz done: {right}/{total} correct" + (" ✔" if right == total else ""),
                        severity="information")
        self.deps.on_progress()


__all__ = ["LessonScreen", "lesson_markdown"]
