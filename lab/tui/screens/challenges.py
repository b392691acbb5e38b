"""`ChallengeScreen`: the graded challenges - start (copy the code), edit, check in sim.

Over lab/course/challenges.py (headless): this screen only lists, shows the brief of the selected
challenge and runs `check` in a thread worker through the app's runner. In a lab served to a
browser it says why challenges are off (learners' code is not run on the server) and offers
nothing to press.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from lab.course import challenges as chl
from lab.course.reference import load_reference
from lab.report import recorded_on
from lab.serve.policy import Refused, served


def reflow(text: str) -> str:
    """A docstring's paragraphs as one line each (the screen wraps them to its width)."""
    paras = [" ".join(line.strip() for line in para.splitlines()) for para in text.split("\n\n")]
    return "\n\n".join(p for p in paras if p)


def status_text(progress, ch) -> Text:
    lp = progress.lessons.get(ch.lesson.id)
    rec = lp.challenges.get(ch.id) if lp else None
    if rec and rec.get("passed"):
        return Text("✔ passed", style="bold green")
    if rec:
        return Text("✗ not yet", style="yellow")
    if chl.copy_path(ch).is_file():
        return Text("● started", style="yellow")
    return Text("○ not started", style="dim")


class ChallengeScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("s", "start", "Start (copy)"),
        Binding("e", "edit", "Edit"),
        Binding("c", "check", "Check"),
        Binding("h", "hint", "Hint"),
    ]
    DEFAULT_CSS = """
    ChallengeScreen #ch-table { height: auto; max-height: 9; }
    ChallengeScreen #ch-detail { height: 1fr; padding: 0 1; }
    ChallengeScreen #ch-served { padding: 1 2; color: $warning; }
    """

    def __init__(self):
        super().__init__()
        self.items: list = []
        self.grades: dict[str, chl.Grade] = {}
        self.checking: str | None = None
        self.shown_hint: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Header()
        if served():
            yield Static(chl.SERVED_REFUSAL, id="ch-served")
        else:
            yield DataTable(id="ch-table", cursor_type="row")
            with VerticalScroll(id="ch-detail"):
                yield Static("", id="ch-text")
        yield Footer()

    def on_mount(self) -> None:
        self.title, self.sub_title = "Challenges", "graded in sim · answers recorded on a GPU"
        if served():
            return
        try:
            self.items = chl.all_challenges(self.app.course)
        except chl.ChallengeError as e:
            self.query_one("#ch-text", Static).update(Text(f"⚠ {e}", style="yellow"))
            return
        self._columns(self.app.size.width)
        self.query_one("#ch-table", DataTable).focus()

    def on_resize(self, event) -> None:
        if not served() and self.items:
            self._columns(event.size.width)

    def _columns(self, width: int) -> None:
        """The goal takes the width the id and the status leave, and wraps in it (a goal is
        read whole at 80 columns, never cut)."""
        table = self.query_one("#ch-table", DataTable)
        id_w = max([len("challenge")] + [len(ch.id) for ch in self.items])
        goal_w = max(16, width - id_w - len("○ not started") - 3 * 2 - 2 - 2)
        if table.columns and table.columns.get("title") and table.columns["title"].width == goal_w:
            return
        table.clear(columns=True)
        table.add_column("challenge", key="id", width=id_w)
        table.add_column("status", key="status", width=len("○ not started"))
        table.add_column("goal", key="title", width=goal_w)
        self.refresh_view()

    def check_action(self, action: str, parameters) -> bool | None:
        """Served: nothing to start, edit or check (the footer shows only Back)."""
        if served() and action in ("start", "edit", "check", "hint"):
            return False
        return True

    # ---- view ----------------------------------------------------------------------------------
    @property
    def current(self):
        if not self.items:
            return None
        row = self.query_one("#ch-table", DataTable).cursor_row
        return self.items[min(max(row, 0), len(self.items) - 1)]

    def refresh_view(self) -> None:
        table = self.query_one("#ch-table", DataTable)
        row = table.cursor_row
        table.clear()
        for ch in self.items:
            table.add_row(ch.id, status_text(self.app.progress, ch), Text(ch.title), key=ch.id,
                          height=None)
        if self.items:
            table.move_cursor(row=min(row, len(self.items) - 1))
        self.show_detail()

    def show_detail(self) -> None:
        ch = self.current
        if ch is None:
            return
        recorded = load_reference(ch.lesson.id, self.app.reference_root).get(ch.solution_variant)
        path = chl.copy_path(ch)
        # the learner's own grade first, under the title: at 80x24 the brief fills the pane, and
        # a result below it would be out of sight
        parts = [Text(ch.title, style="bold")]
        if self.checking == ch.id:
            parts.append(Text("Checking in sim…", style="yellow"))
        g = self.grades.get(ch.id)
        if g is not None:
            parts.append(Text("PASSED" if g.passed else "not yet", style="bold green" if g.passed
                              else "bold yellow"))
            for line in g.lines:
                parts.append(Text(f"{'✔' if line.ok else '✗'} {line.text}",
                                  style="green" if line.ok else "red"))
            if g.error and not g.passed:
                parts.append(Text(g.error, style="dim"))
        say = ch.lesson.renumbered  # "lesson 17" as the course map numbers it
        if ch.id in self.shown_hint and ch.hint:
            parts.append(Text(f"Hint: {say(ch.hint)}", style="italic"))
        parts += [Text(""), Text(say(reflow(ch.brief))), Text("")]
        parts.append(Text(f"Your copy: {path}" if path.is_file() else
                          "Not started: s copies the starting code into your data folder.",
                          style="cyan" if path.is_file() else "dim"))
        parts.append(Text(f"A reference solution ran on the {recorded_on([recorded])} (lesson "
                          f"{ch.lesson.key}, variant {ch.solution_variant})" if recorded else
                          f"Reference solution: lesson {ch.lesson.key}, variant "
                          f"{ch.solution_variant} (GPU recording pending)", style="dim"))
        self.query_one("#ch-text", Static).update(Text("\n").join(parts))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()

    # ---- actions -------------------------------------------------------------------------------
    def action_start(self) -> None:
        ch = self.current
        if ch is None:
            return
        try:
            path, new = chl.start(ch)
        except (Refused, OSError) as e:
            self.notify(str(e), severity="error")
            return
        self.notify(f"{'Copied to' if new else 'Your copy is kept at'} {path}: e opens $EDITOR, "
                    "c checks it", timeout=8)
        self.refresh_view()

    def action_edit(self) -> None:
        ch = self.current
        if ch is None:
            return
        path = chl.copy_path(ch)
        if not path.is_file():
            self.notify("Not started yet: s copies the starting code first.", severity="warning")
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.notify(f"No $EDITOR set: open {path} in any editor, then press c.", timeout=10)
            return
        try:
            with self.app.suspend():
                subprocess.run([*shlex.split(editor), str(path)], check=False)
        except Exception as e:  # no terminal to hand over (a browser), a missing editor
            self.notify(f"Could not start {editor}: {e}. Open {path} yourself.", severity="warning")
        self.refresh_view()

    def action_hint(self) -> None:
        ch = self.current
        if ch is not None:
            self.shown_hint.add(ch.id)
            self.show_detail()
            self.query_one("#ch-detail").scroll_home(animate=False)

    def action_check(self) -> None:
        ch = self.current
        if ch is None or self.checking:
            return
        if not chl.copy_path(ch).is_file():
            self.notify("Not started yet: s copies the starting code first.", severity="warning")
            return
        self.checking = ch.id
        self.show_detail()
        self.run_check(ch)

    @work(thread=True, exclusive=True, group="challenge", exit_on_error=False)
    def run_check(self, ch) -> None:
        try:
            g = chl.check(ch, self.app.runner, self.app.progress)
            self.app.call_from_thread(self._checked, ch, g, None)
        except Exception as e:  # a broken copy is a grade, not a crash; anything else: one line
            self.app.call_from_thread(self._checked, ch, None, f"{type(e).__name__}: {e}")

    def _checked(self, ch, g, error: str | None) -> None:
        self.checking = None
        if g is not None:
            self.grades[ch.id] = g
            self.notify(f"{ch.id}: {'passed' if g.passed else 'not yet'}",
                        severity="information" if g.passed else "warning")
        else:
            self.notify(error or "the check failed", severity="error")
        self.refresh_view()
        self.query_one("#ch-detail").scroll_home(animate=False)  # the grade is at the top


__all__ = ["ChallengeScreen", "status_text"]
