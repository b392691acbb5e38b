"""`HomeScreen`: the course map, "continue where you left off", and what this machine gives."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Static

from lab.progress import NOT_STARTED, QUIZ_DONE, QUIZ_PASSED, RUN

from ..look import percent

STATUS_TEXT = {
    NOT_STARTED: ("○ not started", "dim"),
    RUN: ("● run", "yellow"),
    QUIZ_DONE: ("◐ quiz done", "bold"),
    QUIZ_PASSED: ("✔ quiz passed", "bold green"),
}


def challenges_line(app) -> str:
    """The course map's word on the graded challenges (lab/challenges.py)."""
    from lab.challenges import ChallengeError, summary

    try:
        ok, total = summary(app.progress, app.course)
    except ChallengeError:
        return ""
    return f" · challenges {ok}/{total} (x)" if total else ""


def challenges_of(app, lesson) -> str:
    """After a lesson's title on the map: how many of its challenges are passed."""
    from lab.challenges import ChallengeError, load_challenges, passed

    try:
        chs = load_challenges(lesson)
    except ChallengeError:
        return ""
    return f" · challenges {sum(passed(app.progress, c) for c in chs)}/{len(chs)}" if chs else ""


def guess_text(lp) -> Text:
    """The calibration column: how far the prediction was from the result."""
    if lp is None or lp.prediction_gb is None:
        return Text("—", style="dim")
    if lp.prediction_late:
        return Text("late", style="dim")
    err = lp.calibration_error
    if err is None:
        return Text("made", style="dim")
    return Text(percent(err), style="green" if abs(err) <= 0.1 else "yellow")


class HomeScreen(Screen):
    BINDINGS = [
        Binding("c", "continue", "Continue"),
        Binding("enter", "open", "Open", show=False),
        Binding("k", "app.calibration", "Predictions"),
        Binding("R", "reset", "Reset progress"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="banner")
        yield Static(self.app.course.intro.strip().replace("\n", " "), id="intro")
        with Horizontal(id="continue-row"):
            yield Button("▶ Continue", id="continue", variant="primary", compact=True)
            yield Static("", id="summary")
        yield DataTable(id="lessons", cursor_type="row", zebra_stripes=True)
        yield Static("", id="broken")
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.app.course.title
        self.sub_title = "course map"
        table = self.query_one("#lessons", DataTable)
        table.add_column("#", key="n")
        # status before the title: long titles may be cut at 80 columns, the status never
        table.add_column("status", key="status")
        table.add_column("guess", key="guess")  # how close the prediction was (k: all of them)
        table.add_column("lesson", key="title")
        self.refresh_view()
        self.watch(self.app, "device_state", lambda _s: self.refresh_banner(), init=False)
        table.focus()

    def refresh_banner(self) -> None:
        self.query_one("#banner", Static).update(self.app.device_banner())

    def refresh_view(self) -> None:
        """Re-read progress: statuses, the continue target, the summary."""
        self.refresh_banner()
        app, table = self.app, self.query_one("#lessons", DataTable)
        row = table.cursor_row
        table.clear()
        done, part = 0, None
        for lesson in app.course.lessons:
            mine = app.course.part_of(lesson)
            part_label = Text(mine.short if mine else "", style="bold") if mine is not part else Text("")
            part = mine
            status = app.progress.status(lesson.id)
            done += status == QUIZ_PASSED
            label, style = STATUS_TEXT[status]
            if status == QUIZ_DONE:
                right, total = app.progress.lessons[lesson.id].quiz_score
                label = f"◐ quiz {right}/{total}"
            # the part (course.toml) is the row label of its first lesson: the columns stay put
            table.add_row(lesson.key, Text(label, style=style),
                          guess_text(app.progress.lessons.get(lesson.id)),
                          lesson.title + challenges_of(app, lesson), key=lesson.id, label=part_label)
        if app.course.lessons:
            table.move_cursor(row=min(row, len(app.course.lessons) - 1))
        target = app.continue_target()
        button = self.query_one("#continue", Button)
        button.display = target is not None
        if target is not None:
            started = app.progress.last_lesson is not None
            button.label = f"▶ {'Continue' if started else 'Start'}: {target.key} {target.title}"
        n = len(app.course.lessons)
        self.query_one("#summary", Static).update(
            Text(f"  {done}/{n} quizzes passed · guess: how far your prediction was (k)"
                 + challenges_line(app), style="dim"))
        broken = self.query_one("#broken", Static)
        broken.display = bool(app.course.errors)
        broken.update(Text("\n".join(f"⚠ could not load: {e}" for e in app.course.errors),
                           style="yellow"))

    def on_screen_resume(self) -> None:
        self.refresh_view()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.app.open_lesson(self.app.course.find(str(event.row_key.value)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "continue":
            self.action_continue()

    def action_open(self) -> None:
        table = self.query_one("#lessons", DataTable)
        if self.app.course.lessons:
            self.app.open_lesson(self.app.course.lessons[table.cursor_row])

    def action_continue(self) -> None:
        target = self.app.continue_target()
        if target is not None:
            self.app.open_lesson(target)

    def action_reset(self) -> None:
        self.app.action_reset_progress()
