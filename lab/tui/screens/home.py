"""`HomeScreen`: the course map, "continue where you left off", and what this machine gives.

It is given the course, the progress store and two questions for the app (what this machine
gives, which lesson "continue" opens), never reaching into the app for them. Each lesson's
status says what the learner did there: predicted, seen (its recording played back), run,
the quiz. At 80 columns the lesson titles wrap inside their column instead of being cut, and
the counters and the banner take their short forms.
"""

from __future__ import annotations

from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Static

from lab.course.curriculum import Course, Lesson
from lab.course.progress import NOT_STARTED, PREDICTED, QUIZ_DONE, QUIZ_PASSED, RUN, SEEN, Progress

from lab.report import rough_percent
from ..widgets.fit import Fit

STATUS_TEXT = {
    NOT_STARTED: ("○ not started", "dim"),
    PREDICTED: ("◔ predicted", ""),
    SEEN: ("◐ seen", "cyan"),
    RUN: ("● run", "yellow"),
    QUIZ_DONE: ("◑ quiz done", "bold"),
    QUIZ_PASSED: ("✔ quiz passed", "bold green"),
}
FIXED_COLUMNS = (("#", 2), ("status", 13), ("guess", 5))  # the title takes what is left
TALL = 30  # from this height the course's whole intro is shown; below it, its first sentence


def challenges_line(progress: Progress, course: Course) -> str:
    """The course map's word on the graded challenges (lab/course/challenges.py)."""
    from lab.course.challenges import ChallengeError, summary

    try:
        ok, total = summary(progress, course)
    except ChallengeError:
        return ""
    return f" · x: challenges {ok}/{total}" if total else ""


def challenges_of(progress: Progress, lesson: Lesson) -> str:
    """After a lesson's title on the map: how many of its challenges are passed."""
    from lab.course.challenges import ChallengeError, load_challenges, passed

    try:
        chs = load_challenges(lesson)
    except ChallengeError:
        return ""
    return f" · challenges {sum(passed(progress, c) for c in chs)}/{len(chs)}" if chs else ""


def guess_text(lp) -> Text:
    """The calibration column: how far the prediction was from the result."""
    if lp is None or lp.prediction_gb is None:
        return Text("—", style="dim")
    if lp.prediction_late:
        return Text("late", style="dim")
    err = lp.calibration_error
    if err is None:
        return Text("made", style="dim")
    return Text(rough_percent(err), style="green" if abs(err) <= 0.1 else "yellow")


def status_text(progress: Progress, lesson_id: str) -> Text:
    status = progress.status(lesson_id)
    label, style = STATUS_TEXT[status]
    if status == QUIZ_DONE:
        right, total = progress.lessons[lesson_id].quiz_score
        label = f"◑ quiz {right}/{total}"
    return Text(label, style=style)


def short_title(lesson: Lesson, room: int) -> str:
    """The title; its part before the colon when the whole does not fit `room`; else that part
    cut at a word, with an ellipsis (never mid-word)."""
    if len(lesson.title) <= room:
        return lesson.title
    head = lesson.title.split(":")[0].strip()
    if len(head) <= room:
        return head
    cut = head[:max(1, room - 1)].rsplit(" ", 1)[0]
    return cut + "…"


def summary_forms(done: int, n: int, challenges: str) -> list[str]:
    """The counters beside the continue button, the longest first; the challenges' key (x)
    is in every form, so it is found at any width."""
    return [f"  {done}/{n} quizzes passed · guess: how far your prediction was (k){challenges}",
            f"  {done}/{n} quizzes passed · k: guesses{challenges}",
            f"  {done}/{n} quizzes passed{challenges}",
            f"  {done}/{n} passed{challenges}"]


class HomeScreen(Screen):
    BINDINGS = [
        Binding("c", "continue", "Continue"),
        Binding("enter", "open", "Open", show=False),
        Binding("k", "app.calibration", "Predictions"),
        Binding("R", "reset", "Reset progress"),
    ]

    def __init__(self, course: Course, progress: Progress, banner: Callable[[], Text],
                 continue_target: Callable[[], Lesson | None]):
        super().__init__()
        self.course, self.progress = course, progress
        self.banner, self.continue_target = banner, continue_target
        self._title_width = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="banner")
        yield Static("", id="intro")
        with Horizontal(id="continue-row"):
            yield Button("▶ Continue", id="continue", variant="primary", compact=True)
            yield Static("", id="summary")
        yield DataTable(id="lessons", cursor_type="row", zebra_stripes=True)
        yield Static("", id="broken")
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.course.title
        self.sub_title = "course map"
        self._layout(self.app.size.width, self.app.size.height)
        self.watch(self.app, "device_state", lambda _s: self.refresh_banner(), init=False)
        self.query_one("#lessons", DataTable).focus()

    def on_resize(self, event) -> None:
        self._layout(event.size.width, event.size.height)
        self._continue_label()  # the button's title fits the new width

    def _layout(self, width: int, height: int) -> None:
        intro = self.course.intro.strip().replace("\n", " ")
        first = intro.split(". ")[0].rstrip(".") + "." if intro else ""
        self.query_one("#intro", Static).update(intro if height >= TALL else first)
        # the title column gets the width the others leave (table margins, the part label,
        # cell padding and the scrollbar): a long title wraps in it, never cut off
        label = max((len(p.short) for p in self.course.parts), default=0)
        used = 2 + 2 + label + 2 + sum(w + 2 for _, w in FIXED_COLUMNS) + 2
        title_width = max(16, width - used)
        if title_width != self._title_width:
            self._title_width = title_width
            table = self.query_one("#lessons", DataTable)
            table.clear(columns=True)
            # status before the title: the status is never cut, a long title wraps
            for (name, w), key in zip(FIXED_COLUMNS, ("n", "status", "guess")):
                table.add_column(name, key=key, width=w)
            table.add_column("lesson", key="title", width=title_width)
            self.refresh_view()

    def refresh_banner(self) -> None:
        self.query_one("#banner", Static).update(self.banner())

    def refresh_view(self) -> None:
        """Re-read progress: statuses, the continue target, the summary."""
        self.refresh_banner()
        course, progress = self.course, self.progress
        table = self.query_one("#lessons", DataTable)
        if not table.columns:
            return
        row = table.cursor_row
        table.clear()
        done, part = 0, None
        for lesson in course.lessons:
            mine = course.part_of(lesson)
            part_label = Text(mine.short if mine else "", style="bold") if mine is not part else Text("")
            part = mine
            done += progress.status(lesson.id) == QUIZ_PASSED
            # the part (course.toml) is the row label of its first lesson: the columns stay put
            table.add_row(lesson.key, status_text(progress, lesson.id),
                          guess_text(progress.lessons.get(lesson.id)),
                          Text(lesson.title + challenges_of(progress, lesson)),
                          key=lesson.id, label=part_label, height=None)
        if course.lessons:
            table.move_cursor(row=min(row, len(course.lessons) - 1))
        self._continue_label()
        self.query_one("#summary", Static).update(Fit(*(Text(f, style="dim")
                                                        for f in self._summary(done))))
        broken = self.query_one("#broken", Static)
        broken.display = bool(course.errors)
        broken.update(Text("\n".join(f"⚠ could not load: {e}" for e in course.errors),
                           style="yellow"))

    def _summary(self, done: int | None = None) -> list[str]:
        progress, course = self.progress, self.course
        if done is None:
            done = sum(progress.status(l.id) == QUIZ_PASSED for l in course.lessons)
        return summary_forms(done, len(course.lessons), challenges_line(progress, course))

    def _continue_label(self) -> None:
        """"▶ Continue: 02 Forward, backward, step": the title takes what the shortest counters
        leave beside it, shortened at a word, never cut."""
        target = self.continue_target()
        button = self.query_one("#continue", Button)
        button.display = target is not None
        if target is not None:
            verb = "Continue" if self.progress.last_lesson is not None else "Start"
            head = f"▶ {verb}: {target.key} "
            room = self.app.size.width - 2 - 2 - len(self._summary()[-1]) - len(head)
            button.label = head + short_title(target, room)
            button.refresh(layout=True)  # a label is no layout reactive: a shorter one kept the
            # wider button of a wider terminal, and the counters beside it got no room

    def on_screen_resume(self) -> None:
        self.refresh_view()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.app.open_lesson(self.course.find(str(event.row_key.value)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "continue":
            self.action_continue()

    def action_open(self) -> None:
        table = self.query_one("#lessons", DataTable)
        if self.course.lessons:
            self.app.open_lesson(self.course.lessons[table.cursor_row])

    def action_continue(self) -> None:
        target = self.continue_target()
        if target is not None:
            self.app.open_lesson(target)

    def action_reset(self) -> None:
        self.app.action_reset_progress()
