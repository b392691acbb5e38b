"""The lesson screen is a screen over its model (issue 36): at most 300 lines, one base class, no
mixin anywhere in lab/tui — its behaviour lives in the headless `LessonRun` model and the words
and plans beside it (lab/tui/lesson_model.py, lesson_words.py, lesson_plans.py) and in its
widgets (the RunDriver posts the run's messages up). Read from the source: no Textual here."""

from __future__ import annotations

import ast
from pathlib import Path

import lab.tui
from lab import python_source

TUI = Path(lab.tui.__file__).parent
SCREEN = TUI / "screens" / "lesson.py"


def classes(path: Path) -> list[ast.ClassDef]:
    return [n for n in ast.walk(python_source.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.ClassDef)]


def test_the_lesson_screen_is_small_and_has_one_base():
    lines = SCREEN.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"lab/tui/screens/lesson.py has {lines} lines (at most 300)"
    (screen,) = [c for c in classes(SCREEN) if c.name == "LessonScreen"]
    assert [ast.unparse(b) for b in screen.bases] == ["Screen"]


def test_no_mixin_in_lab_tui():
    mixins = [f"{p.relative_to(TUI)}:{c.name}" for p in TUI.rglob("*.py") for c in classes(p)
              if "mixin" in c.name.lower()]
    assert not mixins
