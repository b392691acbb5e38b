"""The playground: pick a workload, sizes and technique combinations; compare them measured.

    PlaygroundScreen(runner=SubprocessRunner())    # tests pass a runner that replays results
    python -m lab.tui.screens.playground           # standalone

The workload list is loaded in a thread (today it imports torch); every call into the workload
layer goes through `playground_data`. Each combination runs in its own worker (a thread
worker drives them in turn, so the UI stays live); rows land in the table as results arrive,
and the timelines (aligned by phase, as in the lessons) grow with them; the peak-memory vs
step-time chart follows at the end. `r` (or Enter in a field) runs, Esc cancels a comparison
in progress (the worker is killed) or leaves. Changing the workload or the mode clears the old
results. Posts `PlaygroundScreen.ComparisonDone` with the finished comparison.
"""

from __future__ import annotations

import threading

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Label, Select, Static
from textual_plotext import PlotextPlot

from lab.measure.modes import MODES as MODE_NAMES, ModeChoice, ModeError, choose, mode_info
from lab.measure.result import RunResult
from lab.serve.limits import refusal_of

from lab.report import (DASH, FIRST, Row, delta_text, number, peak_text, step_text,
                        with_deltas)

from ..look import variant_rgb
from ..widgets.quiz import NumberInput
from ..widgets.timeline import Series, TimelinePlot
from . import playground_data as data

# the Select's choices: every mode of the one table, in words (lab.measure.modes)
MODE_CHOICES = [("auto", "auto"), ("cpu (real run, small sizes)", "cpu"),
                ("sim (exact bytes, full sizes)", "sim"), ("cuda (your GPU)", "cuda")]
DEFAULT_COMBOS = "baseline bf16 ckpt bf16+ckpt"
INTRO = ("Compare memory-saving techniques on a workload of your choosing. Each combination "
         "runs in its own process; the first one is the baseline.")


class TradeoffPlot(PlotextPlot):
    """Peak memory against step time: one labelled point per combination."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows: list = []

    def replot(self) -> None:
        p = self.plt
        p.clear_data()
        p.clear_figure()
        rows = [r for r in self.rows if r.status == "ok" and r.step_time_s is not None]
        if not rows:
            p.title("peak vs step time (timed runs)")
            p.xticks([], [])
            p.yticks([0], ["0"])
        else:
            data.draw_tradeoff(p, rows)
        self.refresh()


class PlaygroundScreen(Screen):
    DEFAULT_CSS = """
    PlaygroundScreen { layout: vertical; }
    PlaygroundScreen #intro { height: auto; padding: 0 1; color: $text-muted; }
    PlaygroundScreen #form { height: auto; padding: 0 1; background: $boost; }
    PlaygroundScreen #form > Horizontal { height: 1; }
    PlaygroundScreen #form Label { padding: 0 1 0 0; color: $text-muted; }
    PlaygroundScreen #workload { width: 16; margin-right: 1; }
    PlaygroundScreen #mode { width: 33; margin-right: 1; }
    PlaygroundScreen #batch, PlaygroundScreen #seq { width: 8; margin-right: 1; }
    PlaygroundScreen #combos { width: 1fr; }
    PlaygroundScreen #tokens { height: auto; padding: 0 1; color: $text-muted; }
    PlaygroundScreen #status { height: auto; padding: 0 1; }
    PlaygroundScreen #results { height: auto; max-height: 8; }
    PlaygroundScreen #plots { height: 1fr; min-height: 8; }
    PlaygroundScreen #timelines { width: 3fr; height: 1fr; }
    PlaygroundScreen #tradeoff { width: 2fr; }
    """
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("ctrl+r", "run", "Run", show=False),
        Binding("escape", "cancel_or_back", "Cancel/Back"),
    ]

    class ComparisonDone(Message):
        def __init__(self, comparison) -> None:
            super().__init__()
            self.comparison = comparison

    def __init__(self, runner=None, workload: str = "mlp", combos: str = DEFAULT_COMBOS,
                 mode: str = "auto", choose_mode=None, **kwargs):
        super().__init__(**kwargs)
        if runner is None:
            from lab.runner.client import default_runner

            runner = default_runner()
        self.runner = runner
        # the one mode rule (lab.measure.modes.choose); the app passes its own, which knows
        # whether there is a GPU; standalone, without that knowledge, there is none
        self.choose_mode = choose_mode or (
            lambda requested, scale, modes: choose(requested, scale, gpu=None, lesson_modes=modes))
        self._workload, self._combos, self._mode = workload, combos, mode
        self._cancel: threading.Event | None = None
        self.catalog: data.Catalog | None = None
        self.comparison = None
        self._plan = None
        self._results: list[RunResult] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(INTRO, id="intro")
        with Vertical(id="form"):
            with Horizontal():
                yield Label("workload")
                yield Select([("loading…", "")], value="", allow_blank=False, compact=True,
                             id="workload")
                yield Label("mode")
                yield Select(MODE_CHOICES, value=self._mode, allow_blank=False, compact=True, id="mode")
            with Horizontal():
                yield Label("batch")
                yield NumberInput(compact=True, id="batch", type="integer", valid_empty=True)
                yield Label("seq")
                yield NumberInput(compact=True, id="seq", type="integer", valid_empty=True)
                yield Label("combinations")
                yield Input(self._combos, compact=True, id="combos",
                            placeholder="e.g. baseline bf16 ckpt bf16+ckpt")
        yield Static("", id="tokens")
        yield Static("Loading the workloads…", id="status")
        yield DataTable(id="results", zebra_stripes=True)
        with Horizontal(id="plots"):
            yield TimelinePlot("live memory", id="timelines")
            yield TradeoffPlot(id="tradeoff")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "GPU Memory Lab"
        self.sub_title = "Playground: compare technique combinations"
        self._columns(self.query_one("#results", DataTable))
        self.query_one(TradeoffPlot).replot()
        self.load_catalog()

    @work(thread=True, exclusive=True, group="playground-catalog", exit_on_error=False)
    def load_catalog(self) -> None:
        try:
            catalog = data.load_catalog()
        except Exception as e:  # a broken install must not take the app down
            self.app.call_from_thread(self._set_status, f"[b]cannot list the workloads:[/b] {e}")
            return
        self.app.call_from_thread(self._catalog_ready, catalog)

    def _catalog_ready(self, catalog: data.Catalog) -> None:
        self.catalog = catalog
        names = list(catalog.workloads)
        select = self.query_one("#workload", Select)
        select.set_options([(n, n) for n in names])
        select.value = self._workload if self._workload in names else names[0]
        tokens = Text("tokens: ", style="bold")
        tokens.append(catalog.tokens_help.replace(" — ", "; "))
        self.query_one("#tokens", Static).update(tokens)
        self._describe()

    # ---- the form ------------------------------------------------------------------------------
    @property
    def workload(self) -> data.WorkloadInfo | None:
        name = self.query_one("#workload", Select).value
        return self.catalog.workloads.get(str(name)) if self.catalog else None

    def choice(self) -> ModeChoice:
        """The mode and scale r runs in (raises a one-line ModeError when impossible here)."""
        return self.choose_mode(str(self.query_one("#mode", Select).value), None, MODE_NAMES)

    def resolved_mode(self) -> str:
        return self.choice().mode

    def _describe(self) -> None:
        """The chosen workload, its default sizes as placeholders, and what r will do."""
        w = self.workload
        if w is None:
            return
        try:
            choice = self.choice()
        except ModeError as e:
            self._set_status(f"[b]cannot run here:[/b] {e}")
            return
        mode, scale = choice.mode, choice.scale
        sizes = w.sizes.get(scale, {})
        for key in ("batch", "seq"):
            box = self.query_one(f"#{key}", Input)
            box.disabled = key not in sizes
            box.placeholder = str(sizes[key]) if key in sizes else "—"
        notes = f" ({'; '.join(w.notes)})" if w.notes and scale == "small" else ""
        timing = "" if mode_info(mode).on_gpu or not mode_info(mode).timed else (
            " CPU timings: not the GPU's.")
        self._set_status(f"[b]{w.name}[/b]: {w.title}{notes}. r runs the combinations in "
                         f"{mode}, {scale} sizes.{timing}")

    @on(Select.Changed)
    def _changed(self, event: Select.Changed) -> None:
        if self.catalog is None or self._cancel is not None:
            return
        self._clear()  # results of another workload or mode would be compared with nothing
        self._describe()

    def _clear(self) -> None:
        self._results, self.comparison = [], None
        self.query_one("#results", DataTable).clear()
        self.query_one(TimelinePlot).set_series([], "live memory")
        trade = self.query_one(TradeoffPlot)
        trade.rows = []
        trade.replot()

    def plan(self):
        """The plan the form describes; raises ValueError/KeyError with one line."""
        w = self.workload
        if w is None:
            raise ValueError("the workloads are still loading")
        sizes = {}
        for key in ("batch", "seq"):
            text = self.query_one(f"#{key}", Input).value.strip()
            if text:
                sizes[key] = int(text)
        choice = self.choice()
        return data.make_plan(w.name, choice.mode, sizes,
                              self.query_one("#combos", Input).value.split(), choice.scale)

    # ---- running -------------------------------------------------------------------------------
    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_run()

    def action_run(self) -> None:
        if self._cancel is not None:
            self.notify("A comparison is running; Esc cancels it.")
            return
        try:
            plan = self.plan()
            refusal = refusal_of(self.runner, plan.requests())  # a served tab's limits
            if refusal:
                raise ValueError(refusal)
        except (ValueError, KeyError) as e:  # ModeError is a ValueError
            self._set_status(f"[b]cannot run:[/b] {str(e.args[0] if e.args else e)}")
            return
        self._clear()
        self._plan = plan
        self._cancel = threading.Event()
        self._set_status(f"running {len(plan.combos)} combinations · {plan.workload} · "
                         f"{plan.mode} · {plan.scale} sizes · Esc cancels")
        self._run(plan, self._cancel)

    @work(thread=True, exclusive=True, group="playground", exit_on_error=False)
    def _run(self, plan, cancel: threading.Event) -> None:
        def on_event(label: str, msg: dict) -> None:
            if msg.get("type") == "phase":
                self.app.call_from_thread(self._set_status,
                                          f"▶ {label}: phase {msg.get('name')} · Esc cancels")

        def on_result(res: RunResult) -> None:
            self.app.call_from_thread(self._add_result, res)

        try:
            comparison = data.run(plan, self.runner, on_event, cancel, on_result)
        except Exception as e:  # a broken runner must not take the app down
            self.app.call_from_thread(self._finish, None, f"{type(e).__name__}: {e}")
            return
        self.app.call_from_thread(self._finish, comparison, None)

    # ---- UI updates (main thread) --------------------------------------------------------------
    def _set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    @staticmethod
    def _columns(table: DataTable) -> None:
        table.add_columns("combination", "status", "peak", "Δ vs baseline", "step time",
                          "throughput")

    def _add_result(self, res: RunResult) -> None:
        self._results.append(res)
        table = self.query_one("#results", DataTable)
        # columns too: their widths then fit every row now in the table (a plain clear()
        # keeps the widths of the rows before, and a wider Δ overflowed its column)
        table.clear(columns=True)
        self._columns(table)
        rows = data.rows(self._plan, self.catalog, self._results)
        simulated = mode_info(self._plan.mode).simulated
        # the cells `memlab compare` prints (lab.report.rows: the first combination is the
        # baseline; an OOM says where it stopped; sim has no step times, and says so)
        cells = with_deltas([Row(r.combo, r.status, r.peak_bytes, step_time_s=r.step_time_s,
                                 simulated=simulated) for r in rows], rule=FIRST)
        for r, row in zip(rows, cells):
            tput = DASH if r.throughput is None else f"{number(r.throughput, digits=3)} {r.unit}/s"
            status = r.status if not r.error else f"{r.status}: {r.error[:60]}"
            table.add_row(r.combo, status, peak_text(row), delta_text(row), step_text(row), tput)
        self.query_one(TimelinePlot).set_series(
            [Series.of(r, variant_rgb(k), label=r.variant) for k, r in enumerate(self._results)],
            f"{self._plan.workload}, {self._plan.mode}")

    def _finish(self, comparison, error: str | None) -> None:
        cancelled = self._cancel is not None and self._cancel.is_set()
        self._cancel = None
        if error:
            self._set_status(f"[b]failed:[/b] {error}")
            return
        self.comparison = comparison
        trade = self.query_one(TradeoffPlot)
        trade.rows = list(comparison.rows) if comparison else []
        trade.replot()
        done = len(comparison.rows) if comparison else 0
        info = mode_info(self._plan.mode)
        noise = (" · CPU timings: not the GPU's (one timed pass each: noisy)"
                 if info.timed and not info.on_gpu else "")
        self._set_status(("cancelled after " if cancelled else "done: ")
                         + f"{done} of {len(self._plan.combos)} combinations · r runs again"
                         + noise)
        if comparison is not None and not cancelled:
            self.post_message(self.ComparisonDone(comparison))

    def action_cancel_or_back(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            self._set_status("cancelling …")
        elif len(self.app.screen_stack) > 1:
            self.dismiss()
        else:
            self.app.exit()


class PlaygroundApp(App):
    """Standalone: `python -m lab.tui.screens.playground`."""

    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False)]

    def __init__(self, runner=None, **kwargs):
        super().__init__()
        self._runner, self._kwargs = runner, kwargs

    def get_default_screen(self) -> Screen:
        return PlaygroundScreen(self._runner, **self._kwargs)


if __name__ == "__main__":
    PlaygroundApp().run()
