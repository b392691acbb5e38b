"""Lesson numbers as the learner meets them (issue 36): the course map, the header, `memlab list`
and `memlab run N` number the lessons in the order the course teaches them, and what a lesson's
text says about another lesson ("as lesson 17 showed") uses the same numbers, although the
authors write the folders' numbers."""

from __future__ import annotations

import re

import pytest

from lab.course.curriculum import load_course, renumber_references

COURSE = load_course()
FOLDER_TO_SEQ = {l.number: int(l.key) for l in COURSE.lessons}


def test_the_numbers_follow_the_course_map_and_find_takes_them():
    assert [int(l.key) for l in COURSE.lessons] == list(range(1, len(COURSE.lessons) + 1))
    for lesson in COURSE.lessons:
        assert COURSE.find(lesson.key) is lesson and COURSE.find(lesson.slug) is lesson


@pytest.mark.parametrize("written, numbering, read", [
    ("as lesson 17 showed", {17: 18}, "as lesson 18 showed"),
    ("Lesson 03's plot", {3: 3, 17: 18}, "Lesson 03's plot"),
    ("lessons 17 and 23", {17: 18, 23: 20}, "lessons 18 and 20"),
    # a range whose lessons are no longer neighbours is written out; one that still is, kept
    ("lessons 08–10 and 12", {8: 8, 9: 9, 10: 11, 12: 13}, "lessons 08, 09, 11 and 13"),
    ("lessons 08–10", {8: 9, 9: 10, 10: 11}, "lessons 09–11"),
    ("lesson 99 and 16-bit floats", {16: 17}, "lesson 99 and 16-bit floats"),  # no such lesson
])
def test_an_authors_reference_reads_in_the_learners_numbers(written, numbering, read):
    assert renumber_references(written, numbering) == read


REF = re.compile(r"\b[Ll]essons? (\d{2})\b")


@pytest.mark.parametrize("lesson", COURSE.lessons, ids=lambda l: l.id)
def test_every_reference_a_learner_reads_names_a_lesson_of_the_course(lesson):
    """Over every text a learner reads (the lesson tab, the quiz, the variants, the code): a
    reference is translated, and lands on a lesson that exists."""
    texts = [t for _, t in lesson.shown_texts()] + [lesson.renumbered(lesson.code)]
    raw = lesson.markdown + lesson.code
    for text in texts:
        for m in REF.finditer(text):
            assert 1 <= int(m.group(1)) <= len(COURSE.lessons), (lesson.id, m.group(0))
    # the first reference the author wrote reads as that lesson's place in the course
    written = [int(n) for n in REF.findall(raw) if int(n) in FOLDER_TO_SEQ]
    if written:
        shown = lesson.renumbered(f"lesson {written[0]:02d}")
        assert shown == f"lesson {FOLDER_TO_SEQ[written[0]]:02d}"
