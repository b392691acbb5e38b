"""The lesson tab's text and the header's titles, as the learner reads them.

`lesson_markdown` puts together what the Lesson tab shows: the title, the summary, the
objectives, the variants, the text before the run and (once a result was seen) the measured
story — through `learner_text`, so what is written for the lesson's authors never reaches a
learner (lab/tui/author_text.py). `header_titles` fits the header at any width, never cutting a
word.

Headless: no Textual, no Rich, no torch.
"""

from __future__ import annotations

from lab.course.curriculum import Lesson

from .author_text import described, learner_text

HEADER_MARGIN = 20  # the header's icon (8) and clock space (10) either side of the title


def lesson_markdown(lesson: Lesson, revealed: bool) -> str:
    objectives = "\n".join(f"- {o}" for o in lesson.objectives)
    variants = "\n".join(f"- **{v.name}** — {v.title}. {v.description}" for v in lesson.variants)
    body = lesson.text_before.strip()
    if body.lstrip("# ").strip().lower() == "placeholder":
        body = ""
    after = lesson.text_after.strip()
    if after and revealed:
        body += "\n\n---\n\n" + after
    elif after:
        body += ("\n\n---\n\n*What the run measured, and the take-away, appear here once you "
                 "have seen the result (press **r**).*")
    return described(lesson, learner_text(
        f"# {lesson.key} · {lesson.title}\n\n{lesson.summary}\n\n## You will\n\n{objectives}\n\n"
        f"## The experiment\n\n{variants}\n\nOpen **Experiment** (key `2`) to read the code, "
        f"then press **r** to run it.\n\n{body}\n"))


def header_titles(lesson: Lesson, width: int, app_title: str = "GPU Memory Lab") -> tuple[str, str]:
    """(title, sub_title) for the header at `width`: the app's name and the lesson when they
    fit; else the lesson alone; else its title up to the colon ("13 · Optimizer state"); else
    cut at a word with an ellipsis. Never cut mid-word, never overlapping the clock."""
    room = max(10, width - HEADER_MARGIN)
    full = f"{lesson.key} · {lesson.title}"
    if len(app_title) + 3 + len(full) <= room:
        return app_title, full
    if len(full) <= room:
        return full, ""
    short = f"{lesson.key} · {lesson.title.split(':')[0].strip()}"
    if len(short) <= room:
        return short, ""
    cut = short[:room - 1].rsplit(" ", 1)[0]
    return cut + "…", ""


__all__ = ["header_titles", "lesson_markdown"]
