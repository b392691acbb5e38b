"""`memlab dev new NN-slug`: scaffold a lesson that `memlab dev check` accepts (recordings pending).

The template in lab/dev/template/ is a complete, runnable lesson (a big nn.Linear with and without
autograd) so an author starts from something that works and edits it, rather than from blanks.
"""

from __future__ import annotations

from pathlib import Path

from lab.course.curriculum import FOLDER_RE, LESSON_FILES

TEMPLATE = Path(__file__).with_name("template")


class NewLessonError(ValueError):
    """One line: what was wrong with the name or the folder."""


def new_lesson(lessons_dir: Path, name: str, title: str | None = None) -> Path:
    m = FOLDER_RE.match(name)
    if not m:
        raise NewLessonError(f"{name!r}: a lesson folder is NN-slug, e.g. 16-reading-snapshots "
                             "(two digits, a dash, lowercase words joined by dashes)")
    number, slug = m.group(1), m.group(2)
    taken = [p.name for p in lessons_dir.iterdir() if p.is_dir() and p.name[:2] == number] \
        if lessons_dir.is_dir() else []
    if taken:
        raise NewLessonError(f"lesson number {number} is taken by {taken[0]}")
    folder = lessons_dir / name
    title = title or slug.replace("-", " ").capitalize()
    folder.mkdir(parents=True)
    fields = {"slug": slug, "title": title, "number": number}
    for fname in LESSON_FILES:
        text = (TEMPLATE / fname).read_text(encoding="utf-8")
        (folder / fname).write_text(text.format(**fields), encoding="utf-8")
    from lab.course.curriculum import load_lesson
    from lab.dev.cite import update

    update(load_lesson(folder))  # the "not recorded yet" H200 block, exactly as cite renders it
    return folder
