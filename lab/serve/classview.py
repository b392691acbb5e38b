"""The instructor's view of a workshop, per lesson: who finished, the learners' predicted peaks
against the measured one, the most common wrong quiz answers; as text, Markdown and CSV.

Read from each learner's progress file (`<workshop>/learners/<name>/progress.jsonl`) and the
measured peak of the lesson's predict-the-peak question: the instructor's pushed run when it
has that variant at that scale, else the H200 recording. Nothing is written but the exports.

Headless: no Textual; plotext only for the histogram, imported there.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lab.course.curriculum import Lesson, Question
from lab.course.progress import FILE_NAME, LessonProgress, decoded, parse
from lab.course.reference import load_reference
from lab.report.tables import table
from lab.report.units import DASH, format_bytes, percent
from lab.serve.classroom import Classroom, instructor_label
from lab.serve.workshop import LEARNERS, learners
from lab.user_files import PROGRESS_LIMIT, UserFileError, read_user_file

FINISHED = ("quiz done", "quiz passed")  # the app branch adds "quiz done" (answered, not all right)


@dataclass
class LearnerRow:
    name: str
    status: str
    runs: int = 0
    prediction_gb: float | None = None
    wrong: list[int] = field(default_factory=list)  # question indexes answered wrong
    invalid: tuple[str, ...] = ()  # fields of the progress file that held no valid value

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass
class LessonView:
    lesson: Lesson
    rows: list[LearnerRow]
    question: Question | None = None  # the predict-the-peak question
    measured_gb: float | None = None
    measured_by: str = ""  # where the measured peak came from
    # (question index, the wrong answer as shown, learners): choices quoted, predictions described
    wrong_answers: list[tuple[int, str, int]] = field(default_factory=list)

    @property
    def finished(self) -> list[str]:
        return [r.name for r in self.rows if r.finished]

    @property
    def predictions(self) -> list[float]:
        return [r.prediction_gb for r in self.rows if r.prediction_gb is not None]

    def error(self, row: LearnerRow) -> float | None:
        if row.prediction_gb is None or not self.measured_gb:
            return None
        return (row.prediction_gb - self.measured_gb) / self.measured_gb


def _status(lp: LessonProgress | None) -> str:
    if lp is None:
        return "not started"
    answered = lp.quiz_total > 0 and all(str(i) in lp.quiz for i in range(lp.quiz_total))
    if lp.status == "quiz passed" or answered:
        return "quiz passed" if lp.status == "quiz passed" else "quiz done"
    if lp.status in ("not started", "predicted", "seen") and (
            lp.quiz or lp.prediction_gb is not None or lp.playbacks):
        return "started"  # predicted or answered, not run yet
    return lp.status


def _load(path: Path) -> dict[str, LessonProgress]:
    """A learner's lessons, read only (a damaged line is skipped, never repaired from here)."""
    try:
        return parse(decoded(read_user_file(path, PROGRESS_LIMIT)))[0].lessons
    except (OSError, UserFileError):  # missing, or not a file the lab would have written
        return {}


def measured_peak(workshop: Path, lesson: Lesson, q: Question | None) -> tuple[float | None, str]:
    if q is None:
        return None, ""
    pushed = Classroom(workshop).pushed(lesson.id).get(q.variant)
    if pushed is not None and pushed.ok and pushed.scale == q.scale:
        return pushed.peak.bytes / 1e9, instructor_label(pushed)
    rec = load_reference(lesson.id).get(q.variant)
    if rec is not None and rec.ok and rec.scale == q.scale:
        return rec.peak.bytes / 1e9, f"recorded on {rec.device.name}"
    return None, ""


def class_progress(workshop: Path) -> dict[str, dict[str, LessonProgress]]:
    """Every learner's lessons, each progress file read once (a class of 100 on 26 lessons
    read each file 26 times before)."""
    return {name: _load(workshop / LEARNERS / name / FILE_NAME) for name in learners(workshop)}


def lesson_view(workshop: Path, lesson: Lesson,
                progress: dict[str, dict[str, LessonProgress]] | None = None) -> LessonView:
    q = next((q for q in lesson.quiz if q.kind == "predict_peak"), None)
    rows, wrong = [], Counter()
    progress = class_progress(workshop) if progress is None else progress
    for name, lessons in progress.items():
        lp = lessons.get(lesson.id)
        row = LearnerRow(name, _status(lp))
        if lp is not None:
            row.runs, row.prediction_gb, row.invalid = lp.runs, lp.prediction_gb, lp.invalid
            for key, ans in lp.quiz.items():
                i = int(key) if key.isascii() and key.isdigit() and len(key) < 6 else -1
                if ans.correct or not 0 <= i < len(lesson.quiz):
                    continue
                row.wrong.append(i)
                question = lesson.quiz[i]
                if question.kind == "choice" and isinstance(ans.answer, int) \
                        and 0 <= ans.answer < len(question.choices):
                    wrong[(i, repr(question.choices[ans.answer]))] += 1
                elif question.kind == "predict_peak":
                    wrong[(i, f"a peak outside the ±{question.tolerance:.0%} tolerance")] += 1
        rows.append(row)
    measured, by = measured_peak(workshop, lesson, q)
    common = [(i, text, n) for (i, text), n in wrong.most_common()]
    return LessonView(lesson, rows, q, measured, by, common)


def class_views(workshop: Path, lessons: list[Lesson], every: bool) -> list[LessonView]:
    """The views `memlab class` and the hub's class page show: each of `lessons`; when
    `every` lesson was asked for, those someone has touched (or the first, so the page is
    never empty)."""
    progress = class_progress(workshop)
    if every:  # only the lessons someone started (a view measures its lesson's peak: slow)
        lessons = [lesson for lesson in lessons
                   if any(_status(p.get(lesson.id)) != "not started" for p in progress.values())
                   ] or lessons[:1]
    return [lesson_view(workshop, lesson, progress) for lesson in lessons]


# ---- output ------------------------------------------------------------------------------------
def _gb(v: float | None) -> str:
    return DASH if v is None else format_bytes(v * 1e9)


INVALID = "invalid"  # a value in the learner's file that the lab could not have written


def _predicted(r: LearnerRow) -> str:
    return INVALID if "prediction_gb" in r.invalid else _gb(r.prediction_gb)


def _rows(view: LessonView) -> list[list[str]]:
    out = []
    for r in view.rows:
        err = view.error(r)
        out.append([r.name, r.status, str(r.runs), _predicted(r),
                    DASH if err is None else percent(err),
                    ", ".join(f"Q{i + 1}" for i in sorted(r.wrong)) or DASH])
    return out


HEADERS = ["learner", "status", "runs", "predicted peak", "vs measured", "wrong answers"]


def _summary(view: LessonView) -> list[str]:
    lesson, q = view.lesson, view.question
    lines = [f"{len(view.finished)} of {len(view.rows)} learners finished"
             + (f": {', '.join(view.finished)}" if view.finished else "")]
    if q is not None:
        measured = (f"{_gb(view.measured_gb)} ({view.measured_by})" if view.measured_gb
                    else "not measured yet (push a run: memlab class push "
                         f"{lesson.key})")
        lines.append(f"predicted peak of {q.variant} at {q.scale} scale: "
                     f"{len(view.predictions)} predictions; measured {measured}")
    return lines


def _wrong_lines(view: LessonView) -> list[str]:
    return [f"Q{i + 1} {view.lesson.quiz[i].question}\n    → {text}: {n} learner(s)"
            for i, text, n in view.wrong_answers[:5]]


def text_report(view: LessonView, plot_width: int = 70) -> str:
    lesson = view.lesson
    parts = [f"Lesson {lesson.key} · {lesson.title} ({lesson.id})", *_summary(view), ""]
    parts.append(table(HEADERS, _rows(view)) if view.rows else "no learners yet")
    if view.predictions:
        parts += ["", histogram(view, plot_width)]
    wrong = _wrong_lines(view)
    parts += ["", "most common wrong answers:" if wrong else "no wrong quiz answers", *wrong]
    return "\n".join(parts)


def histogram(view: LessonView, width: int = 70, height: int = 15) -> str:
    """The learners' predicted peaks (GB) in a plotext histogram, the measured one marked."""
    import plotext as plt

    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    values = view.predictions
    plt.hist(values, bins=min(20, max(5, len(values))), label="predictions")
    if view.measured_gb:
        plt.vline(view.measured_gb, "red")
        plt.title(f"predicted peaks (GB); measured {_gb(view.measured_gb)} (red line)")
    else:
        plt.title("predicted peaks (GB)")
    plt.xlabel("GB")
    return plt.uncolorize(plt.build())  # plain text: a terminal, a log or a Markdown file


def markdown_report(views: list[LessonView]) -> str:
    parts = ["# Workshop: the class per lesson", ""]
    for view in views:
        lesson = view.lesson
        parts += [f"## {lesson.key} · {lesson.title}", "", *_summary(view), ""]
        parts += [table(HEADERS, _rows(view), markdown=True) if view.rows else "No learners.", ""]
        wrong = _wrong_lines(view)
        if wrong:
            parts += ["Most common wrong answers:", ""] + [f"- {w}" for w in wrong] + [""]
    return "\n".join(parts)


def csv_report(views: list[LessonView]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["lesson", "learner", "status", "runs", "predicted_gb", "measured_gb",
                "error", "wrong_questions"])
    for view in views:
        for r in view.rows:
            err = view.error(r)
            w.writerow([view.lesson.id, r.name, r.status, r.runs,
                        INVALID if "prediction_gb" in r.invalid
                        else "" if r.prediction_gb is None else r.prediction_gb,
                        "" if view.measured_gb is None else round(view.measured_gb, 4),
                        "" if err is None else round(err, 4),
                        " ".join(str(i + 1) for i in sorted(r.wrong))])
    return out.getvalue()


__all__ = ["LearnerRow", "LessonView", "class_progress", "class_views", "csv_report", "histogram",
           "lesson_view", "markdown_report", "measured_peak", "text_report"]
