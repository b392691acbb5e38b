"""Small modal screens: help, confirmation, a page of text, and "the terminal is too small"."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from rich.text import Text
from textual.containers import Grid, ScrollableContainer, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Label, Markdown, Static

from lab.course.curriculum import predicted_answer_gb

from lab.report import DASH, format_bytes, rough_percent
from lab.report.units import given_gb
from ..widgets.fit import Col, FitTable

HELP = """\
# GPU Memory Lab — keys

| key | where | does |
|-----|-------|------|
| `Enter` / `c` | course map | open the lesson / continue where you left off |
| `k` / `R` | course map | your predictions, lesson by lesson / reset progress (asks first) |
| `r` | lesson | run every checked variant — without a CUDA GPU: play the lesson's run recorded on a GPU (the status line names the card) |
| `y` | lesson | run it yourself on this machine (no GPU: simulated at seed scale, real CPU at small scale) |
| `s` | lesson | open the GPU's recorded allocator snapshot (when this install has it) |
| `Esc` | lesson | cancel the run; when nothing runs, back to the course map |
| `n` / `p` | lesson | next / previous lesson |
| `1`…`5` | lesson | Lesson · Experiment · Results · Inspector · Quiz (a number typed with a point, like `4.4`, goes to the prediction box instead) |
| `←` `→` (shift: ×10), `m`, `v` | inspector | move the cursor, jump to the peak, next variant |
| `g` | anywhere | the playground: compare technique combinations on a workload |
| `o` | anywhere | open a memory snapshot (`_dump_snapshot` pickle) or a result JSON |
| `o` / `x` | snapshot viewer | the next out-of-memory / why it failed, and would it have fit under other allocator settings (the trace replayed) |
| `ctrl+s` | anywhere | save this screen (e.g. the results) as an SVG file |
| `ctrl+p` | anywhere | command palette: every action by name; type a lesson's number or words to open it |
| `?` / `q` | anywhere | this help / quit |

## Predict, then see

Before a lesson's first result, `r` asks you to predict the peak. The prediction is kept and
cannot be changed once the result is shown; quiz answers are final too (the right answer is
shown after you answer). The course map's *guess* column and `k` show how close you were.

## Reading the plots

- **x** is the run, phase by phase: every phase gets a stretch as wide as the variant that
  spent the most allocation events in it, so each variant is drawn at *its own* phases
  (their names are under the plot). **y** is live memory in **GB (10⁹ bytes)**, the unit of
  the seed tutorials, or MB for small runs.
- Each variant has one colour everywhere (baseline first); each category too:
  parameters, gradients, optimizer state, activations, temporaries, inputs, other.
- Grey vertical lines are phase starts; ● marks each variant's peak; ✕ where a run ran out of
  memory (at the bytes it asked for); a red line is the GPU's capacity when one applies.
  The legend is under the plot and says when two variants are drawn on top of each other.
- **Modes**: `cuda` measures the real caching allocator; `cpu` runs for real; `sim` runs the
  same code on fake tensors: exact bytes at full size, no timing.
- **Scales**: `seed` is the full size of the tutorials ("seed documents") this course grew
  from — a GPU-sized run; `small` is the same code shrunk to run in seconds on a laptop CPU.
- Every number says where it came from: *H200 recording* (real CUDA on the card it names,
  played back), *your GPU*, *your CPU*, or *simulated*.

Press `Esc` to close.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)


class TextScreen(ModalScreen):
    """A page of plain text (a report `memlab view` prints), scrollable both ways: its tables
    keep their lines unwrapped. Esc closes."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen #text-page { width: 96%; height: 92%; border: round $primary; padding: 0 1;
                            background: $surface; }
    TextScreen #text-page > Static { width: auto; }
    """

    def __init__(self, title: str, text: str):
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with ScrollableContainer(id="text-page") as page:
            page.border_title = self.title_text
            page.border_subtitle = "Esc closes · arrows scroll"
            yield Static(Text(self.text, no_wrap=True))

    def on_mount(self) -> None:
        self.query_one("#text-page").focus()  # the arrows scroll the page


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [Binding("escape,n", "dismiss(False)", "No"), Binding("y", "dismiss(True)", "Yes")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Grid(id="confirm"):
            yield Label(self.question, id="confirm-question")
            yield Button("Yes (y)", variant="error", id="yes")
            yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class TooSmallScreen(Screen):
    """Shown instead of a broken layout while the terminal is below the minimum size."""

    BINDINGS = [Binding("q", "app.quit", "Quit")]

    def __init__(self, min_size: tuple[int, int]):
        super().__init__()
        self.min_size = min_size

    def compose(self) -> ComposeResult:
        with Vertical(id="too-small"):
            yield Static("", id="too-small-text")

    def on_mount(self) -> None:
        self.update_size()

    def on_resize(self, event) -> None:
        self.update_size(event.size)

    def update_size(self, size=None) -> None:
        w, h = size or self.app.size
        mw, mh = self.min_size
        self.query_one("#too-small-text", Static).update(
            f"GPU Memory Lab needs a terminal of at least {mw}×{mh}.\n"
            f"This one is {w}×{h}. Make it larger to continue (q quits).")


class PathPromptScreen(ModalScreen[str | None]):
    """Ask for a file path (e.g. a memory snapshot); Esc cancels."""

    DEFAULT_CSS = """
    PathPromptScreen { align: center middle; }
    PathPromptScreen > Vertical { width: 70; height: auto; padding: 1 2; border: thick $primary;
                                  background: $surface; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, question: str, placeholder: str = ""):
        super().__init__()
        self.question, self.placeholder = question, placeholder

    def compose(self) -> ComposeResult:
        from textual.widgets import Input

        with Vertical():
            yield Label(self.question)
            yield Input(placeholder=self.placeholder, id="path")

    def on_input_submitted(self, event) -> None:
        self.dismiss(event.value.strip() or None)


def calibration_table(course, progress) -> FitTable | Text:
    """Lesson by lesson: what you predicted, what the result was (and where it came from). At
    80 columns the source and the verdict go before a number or a title would be cut."""
    rows = progress.calibration()
    if not rows:
        return Text("No predictions yet. A lesson asks for one before its first result (r).",
                    style="dim")
    cols = [Col("lesson", key=True, wrap=True), Col("you said", "right", numeric=True),
            Col("result", "right", numeric=True), Col("from", drop=2),
            Col("off by", "right", numeric=True), Col("", drop=1)]
    errors, table_rows = [], []
    by_id = {lesson.id: lesson for lesson in course.lessons}
    for lp in rows:
        lesson = by_id.get(lp.id)
        name = f"{lesson.key} {lesson.title}" if lesson else lp.id
        q = next((q for q in lesson.quiz if q.kind == "predict_peak"), None) if lesson else None
        truth = lp.truth_gb if lp.truth_gb else (predicted_answer_gb(lesson, q) if q else None)
        source = lp.truth_source if lp.truth_gb else ("the lesson's answer" if q else "")
        err = (lp.prediction_gb - truth) / truth if truth else None
        if lp.prediction_late:
            mark = Text("made after the result: not counted", style="dim")
        elif err is None:
            mark = Text("no result yet", style="dim")
        else:
            errors.append(abs(err))
            ok = q is not None and abs(err) <= q.tolerance
            mark = Text("✔ within the tolerance" if ok else "outside the tolerance",
                        style="green" if ok else "yellow")
        table_rows.append([name, given_gb(lp.prediction_gb),
                           format_bytes(int(truth * 1e9)) if truth else DASH,
                           source, rough_percent(err), mark])
    caption = None
    if errors:
        errors.sort()
        caption = (f"{len(errors)} prediction(s) made before the result: median off by "
                   f"{rough_percent(errors[len(errors) // 2], signed=False)}")
    return FitTable("Your predictions of the peak, lesson by lesson", cols, table_rows,
                    caption=caption)


class CalibrationScreen(ModalScreen):
    """How close the learner's predictions were (kept in the progress file)."""

    DEFAULT_CSS = """
    CalibrationScreen { align: center middle; }
    CalibrationScreen > VerticalScroll { width: 95%; max-width: 110; height: auto;
        max-height: 90%; border: thick $primary; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,k,q", "dismiss", "Close")]

    def __init__(self, course, progress):
        super().__init__()
        self.course, self.progress = course, progress

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(calibration_table(self.course, self.progress))
            yield Static(Text("Esc closes.", style="dim"))
