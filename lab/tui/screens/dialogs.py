"""Small modal screens: help, confirmation, and "the terminal is too small"."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Label, Markdown, Static

HELP = """\
# GPU Memory Lab — keys

| key | where | does |
|-----|-------|------|
| `Enter` / `c` | course map | open the lesson / continue where you left off |
| `R` | course map | reset progress (asks first) |
| `r` | lesson | run every checked variant |
| `Esc` | lesson | cancel the run; when nothing runs, back to the course map |
| `n` / `p` | lesson | next / previous lesson |
| `1`…`5` | lesson | Lesson · Experiment · Results · Inspector · Quiz |
| `←` `→` (shift: ×10), `m`, `v` | inspector | move the cursor, jump to the peak, next variant |
| `g` | anywhere | the playground: compare technique combinations on a workload |
| `o` | anywhere | open a memory snapshot (`_dump_snapshot` pickle) or a result JSON |
| `ctrl+s` | anywhere | save this screen (e.g. the results) as an SVG file |
| `ctrl+p` | anywhere | command palette: every action by name |
| `?` / `q` | anywhere | this help / quit |

## Reading the plots

- **x** is the allocation event number (the same axis in cpu, sim and cuda runs);
  **y** is live memory in **GB (10⁹ bytes)**, the unit of the seed tutorials.
- Each variant has one colour everywhere (baseline first); each category too:
  parameters, gradients, optimizer state, activations, temporaries, inputs, other.
- Grey vertical lines are phase starts; ● marks each variant's peak.
- **Modes**: `cuda` measures the real caching allocator; `cpu` runs for real at a small
  scale; `sim` runs the same code on fake tensors: exact bytes at full size, no timing.
- Without a CUDA GPU the Results tab also shows runs **recorded on an H200**, labelled as such.

Press `Esc` to close.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)


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
