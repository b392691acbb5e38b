"""`QuizView`: multiple choice and "predict the peak" (GB, graded with the lesson's tolerance).

Answers are graded on the spot, the explanation is shown, and `QuizView.Answered` goes up to
the screen, which saves it. A predict-the-peak answer is also compared with the measured peak
of the same variant and scale when the learner has run it.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, RadioButton, RadioSet, Static

from lab.curriculum import Lesson, Question, predicted_answer_gb

from ..look import signed_gb


def grade_prediction(predicted_gb: float, answer_gb: float, tolerance: float) -> bool:
    return abs(predicted_gb - answer_gb) <= tolerance * abs(answer_gb)


def parse_gb(text: str) -> float | None:
    text = text.strip().lower().removesuffix("gb").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 else None


class QuestionCard(Vertical):
    DEFAULT_CSS = """
    QuestionCard { height: auto; border: round $primary 50%; padding: 0 1; margin: 0 0 1 0; }
    QuestionCard > .question { text-style: bold; }
    QuestionCard > RadioSet { width: 1fr; margin-top: 1; }
    QuestionCard > RadioSet > RadioButton { height: auto; }
    QuestionCard > Input { width: 24; }
    QuestionCard > .feedback { height: auto; margin-top: 1; display: none; }
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
                    yield RadioButton(f"{chr(65 + i)}. {choice}")
        else:
            yield Input(placeholder="your answer in GB", id=f"q{self.index}-gb", compact=True)
        yield Static("", classes="feedback")

    def feedback(self, text: Text) -> None:
        box = self.query_one(".feedback", Static)
        box.display = True
        box.update(text)


class QuizView(VerticalScroll):
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
                    self.query_one(f"#q{i}-gb", Input).value = f"{ans.answer:g}"
                    self._grade_prediction(i, float(ans.answer), post=False)
        finally:
            self._restoring = False

    def set_measured(self, measured: dict[tuple[str, str], tuple[int, str]]) -> None:
        self.measured = measured
        for i, q in enumerate(self.lesson.quiz):
            if q.kind == "predict_peak" and i in self.correct:
                value = parse_gb(self.query_one(f"#q{i}-gb", Input).value)
                if value is not None:
                    self._grade_prediction(i, value, post=False)

    def prefill_prediction(self, gb_value: float) -> None:
        for i, q in enumerate(self.lesson.quiz):
            if q.kind == "predict_peak" and i not in self.correct:
                box = self.query_one(f"#q{i}-gb", Input)
                if not box.value:
                    box.value = f"{gb_value:g}"

    # ---- events ------------------------------------------------------------------------------
    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        if self._restoring:
            return
        i = int(event.radio_set.id.split("-")[0][1:])
        self._grade_choice(i, event.index, post=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        i = int(event.input.id.split("-")[0][1:])
        value = parse_gb(event.value)
        card = self.query_one(f"#q{i}", QuestionCard)
        if value is None:
            card.feedback(Text(f"{event.value!r} is not a number of GB (e.g. 4.4)", style="yellow"))
            return
        self._grade_prediction(i, value, post=True)

    # ---- grading -----------------------------------------------------------------------------
    def _grade_choice(self, i: int, choice: int, post: bool) -> None:
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
        self._done(i, choice, correct, post)

    def _grade_prediction(self, i: int, value: float, post: bool) -> None:
        q = self.lesson.quiz[i]
        answer = predicted_answer_gb(self.lesson, q)
        correct = grade_prediction(value, answer, q.tolerance)
        text = Text("✔ Within tolerance. " if correct else "✘ Outside the tolerance. ",
                    style="bold green" if correct else "bold red")
        text.append(f"Expected {answer:.2f} GB (±{q.tolerance:.0%} accepted); you said {value:g} GB "
                    f"({signed_gb(value - answer)}).\n")
        measured = self.measured.get((q.variant, q.scale))
        if measured:
            m_bytes, mode = measured
            m = m_bytes / 1e9
            text.append(f"Measured: {m:.2f} GB ({q.variant}, {q.scale} scale, {mode}); "
                        f"gap to your answer {signed_gb(value - m)}.\n", style="cyan")
        else:
            text.append(f"Run {q.variant} at {q.scale} scale to compare with a measurement.\n",
                        style="dim")
        text.append(q.explain)
        self.query_one(f"#q{i}", QuestionCard).feedback(text)
        self._done(i, value, correct, post)

    def _done(self, i: int, answer, correct: bool, post: bool) -> None:
        self.correct[i] = correct
        self._score()
        if post:
            self.post_message(self.Answered(i, answer, correct))

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
        self.query_one("#quiz-score", Static).update(text)
