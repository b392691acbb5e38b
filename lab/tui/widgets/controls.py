"""`RunControls`: which variants, which mode, which scale, how big a virtual GPU; and Run.

The controls only describe the run; the screen turns them into a `RunPlan` (calls down,
messages up: the Run button's press bubbles to the screen).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, Select

from lab.curriculum import Lesson

from ..look import variant_color

MODE_HELP = {
    "auto": "auto",
    "cuda": "cuda (real GPU)",
    "cpu": "cpu (real, small)",
    "sim": "sim (exact bytes)",
}


class RunControls(Vertical):
    DEFAULT_CSS = """
    RunControls { height: auto; padding: 0 1; background: $boost; }
    RunControls > Horizontal { height: 1; margin: 0 0 0 0; }
    RunControls Label { padding: 0 1 0 0; color: $text-muted; }
    RunControls Checkbox { margin: 0 1 0 0; }
    RunControls #mode { width: 22; margin-right: 1; }
    RunControls #scale { width: 11; margin-right: 1; }
    RunControls #gpu-memory { width: 14; margin-right: 1; }
    RunControls #predict { width: 10; }
    RunControls #run { min-width: 9; }
    """

    def __init__(self, lesson: Lesson, auto_label: str, default_scale: str, *,
                 id: str | None = None):
        super().__init__(id=id)
        self.lesson = lesson
        self.auto_label = auto_label
        self.default_scale = default_scale

    def compose(self) -> ComposeResult:
        lesson = self.lesson
        with Horizontal(id="variant-row"):
            yield Label("variants")
            for i, v in enumerate(lesson.variants):
                yield Checkbox(f"[{variant_color(i)}]■[/] {v.name}", True, compact=True,
                               id=f"v-{v.name}", tooltip=f"{v.title}. {v.description}")
        with Horizontal(id="mode-row"):
            yield Label("mode")
            modes = [("auto → " + self.auto_label, "auto")] + [
                (MODE_HELP[m], m) for m in ("cuda", "cpu", "sim") if m in lesson.modes]
            yield Select(modes, value="auto", allow_blank=False, compact=True, id="mode")
            yield Label("scale")
            yield Select([("seed", "seed"), ("small", "small")], value=self.default_scale,
                         allow_blank=False, compact=True, id="scale")
            yield Label("GPU")
            yield Input(placeholder="no cap", compact=True, id="gpu-memory",
                        tooltip="virtual GPU size, e.g. 16GiB or 30MB: a smaller GPU than the "
                                "real one, so an out-of-memory is real")
            yield Button("▶ Run", compact=True, variant="success", id="run")
        predict = next((q for q in lesson.quiz if q.kind == "predict_peak"), None)
        if predict is not None:
            with Horizontal(id="predict-row"):
                yield Label(f"predict first: {predict.variant} peak at {predict.scale} scale")
                yield Input(placeholder="GB", compact=True, id="predict", type="number")
                yield Label("GB (optional)")

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

    @property
    def prediction_text(self) -> str:
        boxes = self.query("#predict")
        return boxes.first(Input).value.strip() if boxes else ""

    def set_auto_label(self, label: str) -> None:
        self.auto_label = label
        select = self.query_one("#mode", Select)
        value = select.value
        select.set_options([("auto → " + label, "auto")] + [
            (MODE_HELP[m], m) for m in ("cuda", "cpu", "sim") if m in self.lesson.modes])
        select.value = value

    def set_running(self, running: bool) -> None:
        run = self.query_one("#run", Button)
        run.disabled = running
        run.label = "running…" if running else "▶ Run"
