"""Command palette: open a lesson by its number or by words ("13", "memory", "checkpoint").

The app's own actions come from `MemLabApp.get_system_commands`; this provider adds one hit
per lesson. A number matches the lesson with that number exactly; words match the title
(fuzzy, highlighted) or, failing that, appear in the lesson's id, summary or objectives.
"""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from lab.course.curriculum import lesson_number


class LessonCommands(Provider):
    def _lessons(self):
        return list(self.app.course.lessons)

    def _open(self, lesson) -> None:
        screen = self.app.screen
        if getattr(screen, "running", False):
            self.app.notify("A run is in progress: Esc cancels it first.", severity="warning")
            return
        self.app.open_lesson(lesson)

    async def discover(self) -> Hits:
        for lesson in self._lessons():
            yield DiscoveryHit(f"Lesson {lesson.key} · {lesson.title}",
                               partial(self._open, lesson), help=lesson.summary)

    async def search(self, query: str) -> Hits:
        q = query.strip()
        if not q:
            return
        matcher = self.matcher(q)
        for lesson in self._lessons():
            name = f"Lesson {lesson.key} · {lesson.title}"
            if lesson_number(q) is not None:  # ASCII digits: '¹'.isdigit() is true, int() fails
                score = 1.0 if lesson_number(q) == int(lesson.key) else 0.0
            else:
                score = matcher.match(name)
                words = " ".join((lesson.id, lesson.summary, *lesson.objectives)).lower()
                if not score and all(w in words for w in q.lower().split()):
                    score = 0.3
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self._open, lesson), text=name,
                          help=lesson.summary)


__all__ = ["LessonCommands"]
