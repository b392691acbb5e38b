"""Two runs side by side, the difference highlighted: `memlab diff A B --app`, or the command
palette's "Diff two runs" (asks for the two files).

    DiffViewScreen(diff)          # a lab.snapshots.diff.Diff
    open_diff(app)                # the palette entry: ask for A and B, load off the UI thread

Top: the headline ("bf16 vs baseline: peak −2.70 GB (−18%): …"). Then A and B side by side,
each with its peak and its categories drawn as bars on one scale, so the two columns read
against each other. Below, the categories, phases and allocation sites that moved, with Δ in
colour: green where B needs less than A, red where it needs more, bold for the largest move.
Self-contained (the app only adds one palette entry); units from lab.report.
"""

from __future__ import annotations

import shlex

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from lab.report import format_bytes, percent, signed_bytes
from lab.snapshots.diff import Diff, Side

BAR = 16  # characters for the largest category of either side


def delta_text(delta: int, largest: int) -> Text:
    """Δ in colour: less memory in B is green, more is red; the largest move in bold."""
    style = "green" if delta < 0 else "red" if delta > 0 else "dim"
    if delta and abs(delta) == largest:
        style += " bold"
    return Text(signed_bytes(delta), style=style, justify="right")


def side_panel(tag: str, s: Side, scale: int) -> Text:
    """One side: what it is, its peak, and its categories as bars on the shared `scale`."""
    t = Text(no_wrap=True, overflow="crop")  # a narrow panel crops the bars, never wraps a row
    t.append(f"{tag}  {s.label}\n", style="bold")
    t.append(f"peak {format_bytes(s.peak_bytes)}", style="bold")
    t.append(f"{' in ' + s.peak_phase if s.peak_phase else ''}"
             f"{' · ' + s.status if s.status != 'ok' else ''}\n")
    t.append(f"{s.provenance}\n", style="dim")
    if s.peak_where:
        t.append(f"made at {s.peak_where}\n", style="dim")
    width = max((len(k) for k in s.by_category), default=0)
    for cat, n in sorted(s.by_category.items(), key=lambda kv: -kv[1]):
        bar = "█" * max(1 if n else 0, round(BAR * n / max(scale, 1)))
        t.append(f"{cat:<{width}} {format_bytes(n):>10} ")
        t.append(f"{bar}\n", style="cyan")
    t.rstrip()
    return t


class DiffViewScreen(Screen):
    """Two results or snapshots at their peaks, side by side."""

    DEFAULT_CSS = """
    DiffViewScreen { layout: vertical; }
    DiffViewScreen #headline { height: auto; padding: 0 1; text-style: bold; }
    DiffViewScreen #sides { height: auto; }
    DiffViewScreen .side { width: 1fr; height: auto; padding: 0 1; text-wrap: nowrap;
                           text-overflow: clip; border: round $primary-darken-2; }
    DiffViewScreen DataTable { height: auto; max-height: 14; margin: 1 0 0 0; }
    DiffViewScreen #notes { height: auto; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q", "back", "back")]

    def __init__(self, diff: Diff, **kwargs):
        super().__init__(**kwargs)
        self.diff = diff

    def compose(self) -> ComposeResult:
        d = self.diff
        yield Static(d.headline, id="headline")
        scale = max([*d.a.by_category.values(), *d.b.by_category.values(), 1])
        with VerticalScroll():
            with Horizontal(id="sides"):
                yield Static(side_panel("A", d.a, scale), classes="side", id="side-a")
                yield Static(side_panel("B", d.b, scale), classes="side", id="side-b")
            yield DataTable(id="categories", zebra_stripes=True, cursor_type="row")
            yield DataTable(id="phases", zebra_stripes=True, cursor_type="row")
            yield DataTable(id="sites", zebra_stripes=True, cursor_type="row")
            yield Static("\n".join(f"note: {n}" for n in d.notes), id="notes")
        yield Footer()

    def on_mount(self) -> None:
        d = self.diff
        self._fill("categories", "category", d.a.by_category, d.b.by_category,
                   d.by_category_delta)
        self._fill("phases", "phase", d.a.by_phase, d.b.by_phase, d.by_phase_delta)
        self._fill("sites", "allocation site (first frame outside torch)",
                   {s.where: s.a_bytes for s in d.top_sites},
                   {s.where: s.b_bytes for s in d.top_sites},
                   {s.where: s.delta_bytes for s in d.top_sites})

    def _fill(self, table_id: str, what: str, a: dict, b: dict, delta: dict) -> None:
        table = self.query_one(f"#{table_id}", DataTable)
        table.add_column(what, key="name")
        for key, label in (("a", "A"), ("b", "B"), ("delta", "Δ (B − A)"), ("share", "of Δ")):
            table.add_column(label, key=key)
        largest = max((abs(v) for v in delta.values()), default=0)
        total = abs(self.diff.peak_delta_bytes)
        for name, v in delta.items():
            share = percent(abs(v) / total, signed=False) if total and v else ""
            table.add_row(name, Text(format_bytes(a.get(name, 0)), justify="right"),
                          Text(format_bytes(b.get(name, 0)), justify="right"),
                          delta_text(v, largest), Text(share, justify="right"), key=name)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.dismiss()
        else:
            self.app.exit()


class DiffViewApp(App):
    """Standalone, for `memlab diff A B --app`."""

    TITLE = "GPU Memory Lab · diff"

    def __init__(self, diff: Diff):
        super().__init__()
        self.diff = diff

    def on_mount(self) -> None:
        self.push_screen(DiffViewScreen(self.diff))


def parse_pair(text: str) -> tuple[str, str]:
    """'a.json "my run.pkl"' -> ('a.json', 'my run.pkl'); ValueError with one line otherwise."""
    try:
        parts = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"cannot read {text!r}: {e}") from None
    if len(parts) != 2:
        raise ValueError(f"give two files, A then B (got {len(parts)})")
    return parts[0], parts[1]


def open_diff(app: App) -> None:
    """The palette entry: ask for A and B, diff them in a thread, push the screen (or say why
    not: a one-line notification, the app keeps running)."""
    from .dialogs import PathPromptScreen

    def load(a: str, b: str) -> None:
        from lab.snapshots import SnapshotError
        from lab.snapshots.diff import diff_files

        try:
            d = diff_files(a, b)
        except (SnapshotError, OSError) as e:
            app.call_from_thread(app.notify, str(e), title="Cannot diff", severity="error")
            return
        app.call_from_thread(app.push_screen, DiffViewScreen(d))

    def chosen(text: str | None) -> None:
        from lab.serve.policy import Refused, allowed_path

        if not text:
            return
        try:
            # a served tab: only files in the learner's own folder (lab/serve/policy.py)
            a, b = (str(allowed_path(p, f"Diff {tag}")) for p, tag in zip(parse_pair(text), "AB"))
        except (ValueError, Refused) as e:
            app.notify(str(e), title="Cannot diff", severity="error")
            return
        app.run_worker(lambda: load(a, b), thread=True, group="diff", exclusive=True,
                       exit_on_error=False)

    app.push_screen(PathPromptScreen("Two results or snapshots to compare, A then B:",
                                     "e.g. baseline.json bf16.json"), chosen)


__all__ = ["DiffViewApp", "DiffViewScreen", "delta_text", "open_diff", "parse_pair",
           "side_panel"]
