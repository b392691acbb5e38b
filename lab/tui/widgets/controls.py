"""`RunControls`: which variants, which mode, which scale, how big a GPU; and Run.

The controls only describe the run; the screen turns them into a `RunPlan` (calls down,
messages up: the Run button's press bubbles to the screen). What "seed" and "small" mean is
said here, and a lesson that runs on its own virtual GPU (`gpu_memory` in its scale) shows
that cap instead of "no cap". The variant boxes wrap into rows, so a fifth variant is never
cut off at 80 columns.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from lab.course.curriculum import Lesson
from lab.measure.modes import MODES

from lab.report.units import as_given

from ..author_text import described
from ..look import variant_color
from .fit import Fit

MODE_HELP = {
    "auto": "auto",
    "cuda": "cuda (your GPU)",
    "cpu": "cpu (real run)",
    "sim": "sim (exact bytes)",
}
SCALES = [("seed (full size)", "seed"), ("small (fast)", "small")]
SCALE_HELP = ("seed = the full sizes of the tutorials this course comes from (a GPU-sized run); "
              "small = the same code shrunk to run in seconds on a laptop CPU")
SCALE_HELP_SHORT = "seed = the tutorials' full sizes (a GPU run) · small = seconds on a laptop CPU"
ONE_ROW = 92  # narrower than this, the mode/scale and the GPU/Run controls take two rows


class RunControls(Vertical):
    DEFAULT_CSS = """
    RunControls { height: auto; padding: 0 1; background: $boost; }
    RunControls > #mode-rows { height: 1; layout: horizontal; }
    RunControls > #mode-rows.-narrow { height: 2; layout: vertical; }
    RunControls #mode-rows > Horizontal { height: 1; width: auto; }
    RunControls > #variant-row { height: auto; grid-size: 3; grid-rows: 1; grid-columns: 1fr;
                                 grid-gutter: 0 1; }
    RunControls Label { padding: 0 1 0 0; color: $text-muted; }
    RunControls Checkbox { margin: 0; }
    RunControls #mode { width: 22; margin-right: 1; }
    RunControls #scale { width: 20; margin-right: 1; }
    RunControls #gpu-memory { width: 17; margin-right: 1; }
    RunControls #run { min-width: 9; }
    RunControls > .hint { height: auto; color: $text-muted; }
    """

    class Chosen(Message):
        """The learner looked at a variant (tabbed onto its box, or checked it): it runs first."""

        def __init__(self, variant: str) -> None:
            super().__init__()
            self.variant = variant

    def __init__(self, lesson: Lesson, auto_label: str, default_scale: str, *,
                 id: str | None = None):
        super().__init__(id=id)
        self.lesson = lesson
        self.auto_label = auto_label
        self.default_scale = default_scale
        self._idle_label = "▶ Run"
        self._in_flight = False  # a run is going (the button says so)

    def compose(self) -> ComposeResult:
        lesson = self.lesson
        with Grid(id="variant-row"):
            for i, v in enumerate(lesson.variants):
                only = "" if v.recorded else f" ({'/'.join(v.modes)})"  # simulated, not recorded
                yield Checkbox(f"[{variant_color(i)}]■[/] {v.name}{only}", True, compact=True,
                               id=f"v-{v.name}",
                               tooltip=f"{v.title}. {described(lesson, v.description)}")
        with Vertical(id="mode-rows"):
            with Horizontal(id="mode-row"):
                yield Label("mode")
                yield Select(self._modes(), value="auto", allow_blank=False, compact=True,
                             id="mode")
                yield Label("scale")
                yield Select(SCALES, value=self.default_scale, allow_blank=False, compact=True,
                             id="scale", tooltip=SCALE_HELP)
            with Horizontal(id="gpu-row"):
                yield Label("GPU")
                yield Input(placeholder=self._cap_placeholder(self.default_scale), compact=True,
                            id="gpu-memory",
                            tooltip="virtual GPU size, e.g. 16GiB or 30MB: a smaller GPU than the "
                                    "real one, so an out-of-memory is real")
                yield Button("▶ Run", compact=True, variant="success", id="run")
        yield Static(Fit(Text(SCALE_HELP, style="dim"), Text(SCALE_HELP_SHORT, style="dim")),
                     classes="hint", id="scale-help")
        yield Static("", classes="hint", id="predict-row")

    def on_descendant_focus(self, event) -> None:
        if (event.widget.id or "").startswith("v-"):
            self.post_message(self.Chosen(event.widget.id.removeprefix("v-")))

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.value and (event.checkbox.id or "").startswith("v-"):
            self.post_message(self.Chosen(event.checkbox.id.removeprefix("v-")))

    def on_resize(self, event) -> None:
        # as many variant columns as fit (each ~26 cells): wraps instead of cutting one off
        cols = max(1, min(len(self.lesson.variants), (event.size.width - 2) // 26))
        self.query_one("#variant-row", Grid).styles.grid_size_columns = cols
        self.query_one("#mode-rows").set_class(event.size.width < ONE_ROW, "-narrow")

    def _modes(self) -> list[tuple[str, str]]:
        return [("auto → " + self.auto_label, "auto")] + [
            (MODE_HELP[m], m) for m in MODES if m in self.lesson.modes]

    def _cap_placeholder(self, scale: str) -> str:
        cap = self.lesson.scales.get(scale, {}).get("gpu_memory")
        return f"{as_given(int(cap))} (lesson)" if cap else "no cap"

    # ---- reading the controls ----------------------------------------------------------------
    def selected_variants(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.lesson.variants
                     if self.query_one(f"#v-{v.name}", Checkbox).value)

    @property
    def mode(self) -> str:
        return str(self.query_one("#mode", Select).value)

    @property
    def scale(self) -> str:
        return str(self.query_one("#scale", Select).value)

    @property
    def gpu_memory_text(self) -> str:
        return self.query_one("#gpu-memory", Input).value.strip()

    # ---- calls down --------------------------------------------------------------------------
    def set_auto_label(self, label: str) -> None:
        """What auto resolves to, in the mode list; the GPU box's hint for the scale."""
        self.query_one("#gpu-memory", Input).placeholder = self._cap_placeholder(self.scale)
        if label == self.auto_label:
            return  # a Select set to its own value again would post Changed again
        self.auto_label = label
        select = self.query_one("#mode", Select)
        value = select.value
        options = self._modes()
        with select.prevent(Select.Changed):
            select.set_options(options)
            # set_options keeps the same value, so the box would still show the old label: set
            # another option and back, which redraws it (no Changed: the choice did not change)
            if len(options) > 1:
                select.value = options[1][1] if value == options[0][1] else options[0][1]
            select.value = value

    def show_prediction(self, text: Text) -> None:
        self.query_one("#predict-row", Static).update(text)

    def set_running(self, running: bool) -> None:
        # the button says so but stays enabled: disabling a focused button moves the focus to
        # the next widget of this tab, which would take the tabs back here during the run
        # (pressing it while a run is in flight only says that one is)
        self._in_flight = running
        self.query_one("#run", Button).label = "running…" if running else self._idle_label

    def set_idle_label(self, label: str) -> None:
        self._idle_label = label
        if not self._in_flight:
            self.query_one("#run", Button).label = label
