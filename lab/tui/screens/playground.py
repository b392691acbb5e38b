"""The playground: pick a workload, sizes and technique combinations; compare them measured.

    PlaygroundScreen(runner=SubprocessRunner())    # tests pass a runner that replays results
    python -m lab.tui.screens.playground           # standalone

Each combination runs in its own worker (a thread worker drives them in turn, so the UI stays
live); rows land in the table as results arrive, then the overlaid timelines and the peak-memory
vs step-time chart are drawn. `escape` cancels a comparison in progress (the worker process is
killed), or leaves. Posts `PlaygroundScreen.ComparisonDone` with the finished comparison.
"""

from __future__ import annotations

import threading

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, Select, Static
from textual_plotext import PlotextPlot

from lab.measure.result import RunResult
from lab.playground import ComparePlan, Comparison, rows_for, run_compare
from lab.playground.text import gb
from lab.snapshots.series import max_buckets
from lab.workloads import ComboError, all_workloads, get_workload, parse_combos

MODES = [("auto", "auto"), ("cpu (real, small)", "cpu"), ("sim (exact bytes)", "sim"),
         ("cuda", "cuda")]
DEFAULT_COMBOS = "baseline bf16 ckpt bf16+ckpt"


class TimelinesPlot(PlotextPlot):
    """Live memory of every combination, overlaid (allocation # on x)."""

    results: list[RunResult]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.results = []

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        p = self.plt
        p.clear_data()
        ok = [r for r in self.results if r.timeline.index]
        if not ok:
            p.title("live memory (run a comparison)")
            self.refresh()
            return
        top = max(max(r.timeline.live) for r in ok)
        unit, div = ("GB", 1e9) if top >= 0.1e9 else ("MB", 1e6)
        width = max(20, self.size.width or 80)
        for r in ok:
            idx = max_buckets(r.timeline.live, 0, len(r.timeline.live), 2 * width)
            p.plot([r.timeline.index[i] for i in idx], [r.timeline.live[i] / div for i in idx],
                   label=r.variant)
        p.title("live memory over time")
        p.xlabel("allocation #")
        p.ylabel(unit)
        self.refresh()


class TradeoffPlot(PlotextPlot):
    """Peak memory against step time: one labelled point per combination."""

    comparison: Comparison | None

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.comparison = None

    def replot(self) -> None:
        p = self.plt
        p.clear_data()
        rows = [r for r in (self.comparison.rows if self.comparison else [])
                if r.status == "ok" and r.step_time_s is not None]
        if not rows:
            p.title("peak vs step time (needs timings: cpu or cuda)")
            self.refresh()
            return
        from lab.export import draw_tradeoff

        draw_tradeoff(p, rows)
        self.refresh()


class PlaygroundScreen(Screen):
    DEFAULT_CSS = """
    PlaygroundScreen { layout: vertical; }
    PlaygroundScreen #form { height: auto; padding: 0 1; }
    PlaygroundScreen #form Horizontal { height: auto; }
    PlaygroundScreen #form Label { padding: 1 1 0 0; }
    PlaygroundScreen Select { width: 24; }
    PlaygroundScreen #batch, PlaygroundScreen #seq { width: 10; }
    PlaygroundScreen #combos { width: 1fr; }
    PlaygroundScreen #status { height: auto; padding: 0 1; color: $text-muted; }
    PlaygroundScreen #results { height: auto; max-height: 12; }
    PlaygroundScreen #plots { height: 1fr; min-height: 12; }
    PlaygroundScreen TimelinesPlot { width: 3fr; }
    PlaygroundScreen TradeoffPlot { width: 2fr; }
    """
    BINDINGS = [
        Binding("ctrl+r", "run", "run"),
        Binding("escape", "cancel_or_back", "cancel / back"),
    ]

    class ComparisonDone(Message):
        def __init__(self, comparison: Comparison) -> None:
            super().__init__()
            self.comparison = comparison

    def __init__(self, runner=None, workload: str = "mlp", combos: str = DEFAULT_COMBOS,
                 mode: str = "auto", **kwargs):
        super().__init__(**kwargs)
        if runner is None:
            from lab.runner.client import SubprocessRunner

            runner = SubprocessRunner()
        self.runner = runner
        self._workload, self._combos, self._mode = workload, combos, mode
        self._cancel: threading.Event | None = None
        self.comparison: Comparison | None = None

    def compose(self) -> ComposeResult:
        names = list(all_workloads())
        with Vertical(id="form"):
            with Horizontal():
                yield Label("workload")
                yield Select([(n, n) for n in names], value=self._workload if self._workload in
                             names else names[0], allow_blank=False, id="workload")
                yield Label("mode")
                yield Select(MODES, value=self._mode, allow_blank=False, id="mode")
                yield Label("batch")
                yield Input(placeholder="default", id="batch", type="integer")
                yield Label("seq")
                yield Input(placeholder="default", id="seq", type="integer")
            with Horizontal():
                yield Label("combinations")
                yield Input(self._combos, id="combos",
                            placeholder="baseline bf16 ckpt bf16+ckpt accum4 sgd+fused eval")
                yield Button("Run", id="run", variant="primary")
        yield Static("the first combination is the baseline; each runs in its own process",
                     id="status")
        yield DataTable(id="results", zebra_stripes=True)
        with Horizontal(id="plots"):
            yield TimelinesPlot(id="timelines")
            yield TradeoffPlot(id="tradeoff")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#results", DataTable).add_columns(
            "combination", "status", "peak", "Δ vs baseline", "step time", "throughput")

    # ---- input -> plan --------------------------------------------------------------------------
    def plan(self) -> ComparePlan:
        """The plan the form describes; raises ValueError/ComboError with one line."""
        w = get_workload(str(self.query_one("#workload", Select).value))
        mode = str(self.query_one("#mode", Select).value)
        if mode == "auto":
            from lab.measure.device import cuda_available

            mode = "cuda" if cuda_available() else "cpu"
        scale = "small" if mode == "cpu" else "seed"
        sizes = w.default_sizes(scale)
        for key in ("batch", "seq"):
            text = self.query_one(f"#{key}", Input).value.strip()
            if text:
                if key not in sizes:
                    raise ValueError(f"workload {w.name!r} has no {key}")
                if int(text) < 1:
                    raise ValueError(f"{key} must be at least 1")
                sizes[key] = int(text)
        combos = parse_combos(self.query_one("#combos", Input).value.split() or ["baseline"])
        for cfg in combos:
            w.check(cfg, sizes)
        return ComparePlan(w.name, sizes, combos, mode, scale)

    @on(Button.Pressed, "#run")
    def _pressed(self) -> None:
        self.action_run()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_run()

    def action_run(self) -> None:
        if self._cancel is not None:
            self.notify("a comparison is running; escape cancels it")
            return
        try:
            plan = self.plan()
        except (ValueError, KeyError, ComboError) as e:
            self.query_one("#status", Static).update(f"[b]cannot run:[/b] {str(e).strip(chr(39))}")
            return
        table = self.query_one("#results", DataTable)
        table.clear()
        self.query_one(TimelinesPlot).results = []
        self.query_one(TradeoffPlot).comparison = None
        self._results: list[RunResult] = []
        self._plan = plan
        self._cancel = threading.Event()
        self._set_status(f"running {len(plan.combos)} combinations · {plan.workload} · "
                         f"{plan.mode} · {plan.scale}")
        self._run(plan, self._cancel)

    @work(thread=True, exclusive=True, group="playground", exit_on_error=False)
    def _run(self, plan: ComparePlan, cancel: threading.Event) -> None:
        def on_event(label: str, msg: dict) -> None:
            if msg.get("type") == "phase":
                self.app.call_from_thread(self._set_status, f"{label}: {msg['name']}")

        def on_result(res: RunResult) -> None:
            self.app.call_from_thread(self._add_result, res)

        try:
            comparison = run_compare(plan, self.runner, on_event=on_event, cancel=cancel,
                                     on_result=on_result)
        except Exception as e:  # a broken runner must not take the app down
            self.app.call_from_thread(self._finish, None, f"{type(e).__name__}: {e}")
            return
        self.app.call_from_thread(self._finish, comparison, None)

    # ---- UI updates (main thread) ----------------------------------------------------------------
    def _set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def _add_result(self, res: RunResult) -> None:
        self._results.append(res)
        w = all_workloads()[self._plan.workload]
        rows = rows_for(self._results, w.items_per_step(self._plan.sizes), w.unit)
        table = self.query_one("#results", DataTable)
        table.clear()
        for k, r in enumerate(rows):
            delta = "(baseline)" if k == 0 else "—" if r.delta_bytes is None else (
                ("+" if r.delta_bytes >= 0 else "-") + gb(abs(r.delta_bytes))
                + (f" ({r.delta_frac:+.0%})" if r.delta_frac is not None else ""))
            step = "—" if r.step_time_s is None else f"{r.step_time_s * 1000:,.1f} ms"
            tput = "—" if r.throughput is None else f"{r.throughput:,.0f} {w.unit}/s"
            status = r.status if not r.error else f"{r.status}: {r.error[:60]}"
            table.add_row(r.combo, status, gb(r.peak_bytes), delta, step, tput)
        plot = self.query_one(TimelinesPlot)
        plot.results = list(self._results)
        plot.replot()

    def _finish(self, comparison: Comparison | None, error: str | None) -> None:
        cancelled = self._cancel is not None and self._cancel.is_set()
        self._cancel = None
        if error:
            self._set_status(f"[b]failed:[/b] {error}")
            return
        self.comparison = comparison
        trade = self.query_one(TradeoffPlot)
        trade.comparison = comparison
        trade.replot()
        done = len(comparison.rows) if comparison else 0
        self._set_status(("cancelled after " if cancelled else "done: ")
                         + f"{done} of {len(self._plan.combos)} combinations")
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

    def __init__(self, runner=None, **kwargs):
        super().__init__()
        self._runner, self._kwargs = runner, kwargs

    def on_mount(self) -> None:
        self.push_screen(PlaygroundScreen(self._runner, **self._kwargs))


if __name__ == "__main__":
    PlaygroundApp().run()
