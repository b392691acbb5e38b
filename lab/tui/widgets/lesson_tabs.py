"""`LessonTabs`: a lesson's five tabs — the text, the experiment (controls and code), the
results, the inspector, the quiz — and moving between them without the focus pulling back.

Keys 1–5 switch tabs; the tab's main widget takes the focus, so ↑/↓/←/→ scroll it at once.
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static, TabbedContent, TabPane

from ..author_text import described
from ..look import variant_color
from .code_view import CodeView
from .controls import RunControls
from .inspector import InspectorView
from .lesson_text import LessonText
from .quiz import QuizView
from .results import ResultsView

TABS = ("text", "experiment", "results", "inspector", "quiz")
FOCUS = {"text": LessonText, "experiment": CodeView, "results": ResultsView,
         "inspector": InspectorView, "quiz": QuizView}


class LessonTabs(TabbedContent):
    def __init__(self, lesson, auto_label: str = "…", *, id: str | None = None):
        super().__init__(initial="text", id=id)
        self.lesson = lesson
        for pane in (  # as `with TabPane(...)` inside a compose would add them
                TabPane("1 Lesson", LessonText(id="text-scroll"), id="text"),
                TabPane("2 Experiment", Vertical(RunControls(lesson, auto_label, "seed",
                                                             id="controls"),
                                                 Static("", id="variant-info"),
                                                 CodeView(lesson.renumbered(lesson.code),
                                                          id="code-view")),
                        id="experiment"),
                TabPane("3 Results", ResultsView(id="results-view"), id="results"),
                TabPane("4 Inspector", InspectorView(id="inspector-view"), id="inspector"),
                TabPane("5 Quiz", QuizView(lesson, id="quiz-view"), id="quiz")):
            self.compose_add_child(pane)

    def show_tab(self, tab: str) -> None:
        """Switch tabs without the focus pulling them back: a focused widget hidden with its
        pane hands the focus to a neighbour in that pane, whose pane then becomes the active
        one again (a Run button, a variant box). So the focus is let go first."""
        self.screen.set_focus(None)
        if self.active == tab:  # no TabActivated comes: focus its widget here
            self.focus_tab(tab)
        self.active = tab

    def focus_tab(self, tab: str) -> None:
        self.query_one(FOCUS[tab]).focus()
        if tab == "experiment":
            code = self.query_one(CodeView)
            code.mark(code.marked)

    def show_variant(self, name: str, scroll: bool = True) -> None:
        """The Experiment tab on `name`: its function marked (and the technique's code it
        runs), what it is in one line above."""
        self.query_one(CodeView).mark(name, scroll=scroll)
        v, i = self.lesson.variant(name), [x.name for x in self.lesson.variants].index(name)
        self.query_one("#variant-info", Static).update(Text.assemble(
            (f"■ {v.name}", f"bold {variant_color(i)}"), f" — {v.title}. ",
            (described(self.lesson, v.description), "dim")))

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.focus_tab(event.pane.id)  # and it bubbles on: the screen brings the tab up to date


__all__ = ["FOCUS", "LessonTabs", "TABS"]
