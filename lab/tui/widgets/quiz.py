"""`QuizView`: multiple choice and "predict the peak" (GB, graded with the lesson's tolerance).

An answer is final: it is graded on the spot, the right answer and the explanation are shown,
the question is locked (no reveal-and-retry), and `QuizView.Answered` goes up to the screen,
which saves it. The predict-the-peak question holds the prediction committed before the run
when there is one. A predict-the-peak answer is also compared with the peak of the same
variant and scale when a result has one (the H200 recording, or the learner's run). The
feedback is scrolled into view, then the next open question, highlighted ("next"), which takes
the focus.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, RadioButton, RadioSet, Static

from lab.course.curriculum import Lesson, Question, predicted_answer_gb
from lab.course.progress import parse_prediction
from lab.report.numbers import NumberError

from lab.report import format_bytes, percent, signed_bytes
from lab.report.units import given_gb, number


def grade_prediction(predicted_gb: float, answer_gb: float, tolerance: float) -> bool:
    return abs(predicted_gb - answer_gb) <= tolerance * abs(answer_gb)


def parse_gb(text: str) -> float | None:
    """The predicted GB typed, or None; `parse_prediction` says why not (the one parser)."""
    try:
        return parse_prediction(text)
    except NumberError:
        return None


class NumberInput(Input):
    """A number box that lets every other key reach the screen's bindings (e.g. `r` runs)."""

    ALLOWED = set("0123456789.,")

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return character is not None and character in self.ALLOWED

    async def _on_key(self, event) -> None:
        if event.is_printable and event.character not in self.ALLOWED:
            event.prevent_default()  # not Input's: it would type the letter and stop the key
            return
        await super()._on_key(event)


class ChoiceButton(RadioButton):
    """A radio button whose long label wraps onto more lines (at 80 columns a choice of two
    hundred characters is read whole, not cut with an ellipsis)."""

    DEFAULT_CSS = """
    ChoiceButton { width: 1fr; height: auto; text-wrap: wrap; text-overflow: fold; }
    """

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self.render().wrap(max(1, width))))


class QuestionCard(Vertical):
    DEFAULT_CSS = """
    QuestionCard { height: auto; border: round $primary 50%; padding: 0 1; margin: 0 0 1 0; }
    QuestionCard > .question { text-style: bold; }
    QuestionCard > RadioSet { width: 1fr; margin-top: 1; }
    QuestionCard > RadioSet > RadioButton { height: auto; }
    QuestionCard > Input { width: 24; }
    QuestionCard > .feedback { height: auto; margin-top: 1; display: none; }
    QuestionCard.-next { border: round $accent; }
    """

    def __init__(self, lesson: Lesson, index: int, question: Question):
        super().__init__(id=f"q{index}")
        self.lesson, self.index, self.question = lesson, index, question
        self.border_title = f"Question {index + 1}"

    def compose(self) -> ComposeResult:
        q = self.question
        yield Static(q.question, classes="question")
        if q.kind == "choice":
            with RadioSet(id=f"q{self.index}-choices", compact=True):
                for i, choice in enumerate(q.choices):
                    yield ChoiceButton(f"{chr(65 + i)}. {choice}")
        else:
            yield NumberInput(placeholder="GB, then Enter", id=f"q{self.index}-gb", compact=True)
        yield Static("", classes="feedback")

    def feedback(self, text: Text) -> None:
        box = self.query_one(".feedback", Static)
        box.display = True
        box.update(text)
        # the last question's feedback lands below the fold: bring it into view
        self.call_after_refresh(box.scroll_visible, animate=False)

    def freeze_answer(self) -> None:
        for w in self.query("RadioSet, Input"):
            w.disabled = True


class QuizView(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    QuizView { height: 1fr; padding: 0 1; }
    QuizView > #quiz-score { height: auto; margin-bottom: 1; }
    """

    class Answered(Message):
        def __init__(self, index: int, answer, correct: bool) -> None:
            super().__init__()
            self.index, self.answer, self.correct = index, answer, correct

    def __init__(self, lesson: Lesson, *, id: str | None = None):
        super().__init__(id=id)
        self.lesson = lesson
        self.correct: dict[int, bool] = {}
        self.measured: dict[tuple[str, str], tuple[int, str]] = {}  # (variant, scale) -> (bytes, mode)
        self._restoring = False

    def compose(self) -> ComposeResult:
        if not self.lesson.quiz:
            yield Static("This lesson has no quiz.", classes="dim")
            return
        yield Static("", id="quiz-score")
        for i, q in enumerate(self.lesson.quiz):
            yield QuestionCard(self.lesson, i, q)

    def on_mount(self) -> None:
        self._score()

    # ---- calls down --------------------------------------------------------------------------
    def restore(self, answers: dict[str, object]) -> None:
        """Show answers saved in progress (question index as str -> Answer)."""
        self._restoring = True
        try:
            for key, ans in answers.items():
                i = int(key)
                if not 0 <= i < len(self.lesson.quiz):
                    continue
                q = self.lesson.quiz[i]
                if q.kind == "choice" and isinstance(ans.answer, int) and 0 <= ans.answer < len(q.choices):
                    self._grade_choice(i, ans.answer, post=False)
                elif q.kind == "predict_peak" and isinstance(ans.answer, (int, float)):
                    self.query_one(f"#q{i}-gb", Input).value = number(ans.answer, digits=6)
                    self._grade_prediction(i, float(ans.answer), post=False)
        finally:
            self._restoring = False

    def commit_prediction(self, gb_value: float) -> None:
        """The prediction committed before the run is the predict question's answer."""
        for i, q in enumerate(self.lesson.quiz):
            if q.kind == "predict_peak" and i not in self.correct:
                self.query_one(f"#q{i}-gb", Input).value = number(gb_value, digits=6)
                self._grade_prediction(i, gb_value, post=True, move_on=False)

    def set_measured(self, measured: dict[tuple[str, str], tuple[int, str]]) -> None:
        self.measured = measured
        for i, q in enumerate(self.lesson.quiz):
            if q.kind == "predict_peak" and i in self.correct:
                value = parse_gb(self.query_one(f"#q{i}-gb", Input).value)
                if value is not None:
                    self._grade_prediction(i, value, post=False)

    # ---- events ------------------------------------------------------------------------------
    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        i = int(event.radio_set.id.split("-")[0][1:])
        if self._restoring or i in self.correct:
            return
        self._grade_choice(i, event.index, post=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        i = int(event.input.id.split("-")[0][1:])
        if i in self.correct:
            return
        card = self.query_one(f"#q{i}", QuestionCard)
        try:
            value = parse_prediction(event.value)
        except NumberError as e:
            card.feedback(Text(f"{e} (e.g. 4.4)", style="yellow"))
            return
        self._grade_prediction(i, value, post=True)

    # ---- grading -----------------------------------------------------------------------------
    def _grade_choice(self, i: int, choice: int, post: bool, move_on: bool = True) -> None:
        q = self.lesson.quiz[i]
        correct = choice == q.answer
        radio = self.query_one(f"#q{i}-choices", RadioSet)
        buttons = list(radio.query(RadioButton))
        if not buttons[choice].value:
            self._restoring, was = True, self._restoring
            buttons[choice].value = True
            self._restoring = was
        text = Text("✔ Correct. " if correct else "✘ Not quite. ",
                    style="bold green" if correct else "bold red")
        if not correct:
            text.append(f"The answer is {chr(65 + q.answer)}. ", style="bold")
        text.append(q.explain)
        self.query_one(f"#q{i}", QuestionCard).feedback(text)
        self._done(i, choice, correct, post, move_on)

    def _grade_prediction(self, i: int, value: float, post: bool, move_on: bool = True) -> None:
        q = self.lesson.quiz[i]
        answer = predicted_answer_gb(self.lesson, q)
        correct = grade_prediction(value, answer, q.tolerance)
        text = Text("✔ Within tolerance. " if correct else "✘ Outside the tolerance. ",
                    style="bold green" if correct else "bold red")
        text.append(f"The answer: {format_bytes(int(answer * 1e9))} (±"
                    f"{percent(q.tolerance, signed=False)} accepted); you said {given_gb(value)} "
                    f"({signed_bytes(int((value - answer) * 1e9))}).\n")
        measured = self.measured.get((q.variant, q.scale))
        if measured:
            m_bytes, source = measured
            gap = int(value * 1e9) - m_bytes
            text.append(f"{source}: {format_bytes(m_bytes)} ({q.variant}, {q.scale} scale); your answer "
                        f"is off by {signed_bytes(gap)}"
                        + (f" ({percent(gap / m_bytes)})" if m_bytes else "") + ".\n",
                        style="cyan")
        else:
            text.append(f"Run {q.variant} at {q.scale} scale to compare with a result.\n",
                        style="dim")
        text.append(q.explain)
        self.query_one(f"#q{i}", QuestionCard).feedback(text)
        self._done(i, value, correct, post, move_on)

    def _done(self, i: int, answer, correct: bool, post: bool, move_on: bool = True) -> None:
        had_focus = self.screen.focused is not None and self in self.screen.focused.ancestors_with_self
        self.correct[i] = correct
        self.query_one(f"#q{i}", QuestionCard).freeze_answer()
        self._score()
        if post:
            self.post_message(self.Answered(i, answer, correct))
        if move_on and had_focus:  # the locked control lost focus: on to the next open one
            n = len(self.lesson.quiz)  # the next open one below, else the first open above
            nxt = next(((i + d) % n for d in range(1, n) if (i + d) % n not in self.correct), None)
            for card in self.query(QuestionCard):
                card.set_class(card.index == nxt, "-next")
                card.border_subtitle = "next" if card.index == nxt else ""
            if nxt is None:
                self.focus(scroll_visible=False)
                return
            card = self.query_one(f"#q{nxt}", QuestionCard)
            card.query("RadioSet, Input").first().focus(scroll_visible=False)
            # after the feedback is brought into view: the next question below too, by the least
            # scroll (the feedback stays on screen where both fit); one above (the last open
            # question was skipped) is marked, and the feedback just given stays in view
            if nxt > i:
                self.call_after_refresh(lambda: self.call_after_refresh(
                    card.scroll_visible, animate=False))

    def _score(self) -> None:
        if not self.lesson.quiz:
            return
        n = len(self.lesson.quiz)
        right = sum(self.correct.values())
        done = len(self.correct)
        text = Text(f"{right}/{n} correct", style="bold green" if right == n else "bold")
        text.append(f" · {done}/{n} answered" if done < n else " · all answered")
        if right == n:
            text.append(" · quiz passed ✔", style="bold green")
        elif done == n:
            text.append(" · quiz done", style="bold")
        if done < n:
            text.append(" · answers are final: the right one is shown after you answer",
                        style="dim")
        self.query_one("#quiz-score", Static).update(text)
