"""`PredictScreen`: "predict the peak" before the result is shown, committed once.

A modal, so the digits typed go into the box and never switch tabs. Enter commits (and the
run or the H200 playback starts), Esc skips: the run starts without a prediction, which is
then never asked for again before this lesson's result — a prediction made after seeing the
answer would not measure anything.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from lab.course.curriculum import Question
from lab.course.progress import parse_prediction
from lab.report.numbers import NumberError

from ..widgets.quiz import NumberInput, parse_gb

SKIP = -1.0  # dismissed without a prediction


class PredictScreen(ModalScreen[float]):
    DEFAULT_CSS = """
    PredictScreen { align: center middle; }
    PredictScreen > Vertical { width: 72; max-width: 95%; height: auto; padding: 1 2;
                               border: thick $accent; background: $surface; }
    PredictScreen #predict-title { text-style: bold; }
    PredictScreen #predict-box { width: 16; margin: 1 0; }
    PredictScreen #predict-error { color: $warning; height: auto; }
    """
    BINDINGS = [Binding("escape", "skip", "Skip (run without predicting)")]

    def __init__(self, question: Question, what: str, prefill: str = ""):
        super().__init__()
        self.question, self.what, self.prefill = question, what, prefill

    def compose(self) -> ComposeResult:
        q = self.question
        with Vertical():
            yield Label("Before you run it: predict", id="predict-title")
            yield Static(q.question)
            yield NumberInput(self.prefill, placeholder="GB, e.g. 3.5", id="predict-box")
            yield Static("", id="predict-error")
            yield Static(Text.assemble(
                ("Enter", "bold"), f" commits your prediction and {self.what}; ",
                ("Esc", "bold"), " runs it without one. A prediction is kept once the "
                "result is shown (it cannot be changed), and the course map keeps how close "
                "each one was. GB = 10⁹ bytes.", style="dim"))

    def on_mount(self) -> None:
        box = self.query_one("#predict-box", Input)
        box.focus()
        box.cursor_position = len(box.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            value = parse_prediction(event.value)
        except NumberError as e:
            self.query_one("#predict-error", Static).update(
                f"{e} (e.g. 4.4)." if event.value.strip()
                else "Type a number of GB, or Esc to run without predicting.")
            return
        self.dismiss(value)

    def action_skip(self) -> None:
        self.dismiss(SKIP)


__all__ = ["NumberInput", "PredictScreen", "SKIP", "parse_gb"]
