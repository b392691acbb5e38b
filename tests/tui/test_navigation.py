"""Home, lesson, help, palette, the minimum size: getting around with the keyboard."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, TabbedContent

from lab.tui.screens import HelpScreen, HomeScreen, LessonScreen, TooSmallScreen

from tui_helpers import COURSE, make_app, notices, open_first_lesson, text_of, wait_until


async def test_home_lists_every_lesson_with_status_and_banner():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        table = app.screen.query_one("#lessons", DataTable)
        assert table.row_count == len(COURSE.lessons)
        assert "not started" in str(table.get_row_at(0)[1])
        banner = text_of(app.screen, "#banner")
        assert "No CUDA GPU" in banner
        assert "simulation at full scale" in banner


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~5 CPU-s (Textual's layout)
async def test_open_lesson_switch_tabs_and_back_home():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        assert isinstance(app.screen, LessonScreen)
        assert app.screen.lesson.id == COURSE.lessons[0].id
        tabs = app.screen.query_one(TabbedContent)
        for key, tab in (("2", "experiment"), ("3", "results"), ("4", "inspector"),
                         ("5", "quiz"), ("1", "text")):
            await pilot.press(key)
            assert tabs.active == tab
        await pilot.press("escape")  # nothing runs: back to the course map
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_next_and_previous_lesson_stop_at_the_ends():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        await pilot.press("p")  # already the first lesson
        await pilot.pause()
        assert app.screen.lesson.id == COURSE.lessons[0].id
        assert any("first lesson" in n.message for n in notices(app))
        await pilot.press("n")
        await pilot.pause()
        expected = COURSE.lessons[1].id if len(COURSE.lessons) > 1 else COURSE.lessons[0].id
        assert app.screen.lesson.id == expected


@pytest.mark.slow  # the quick tier's 2 minutes; the full suite runs it
async def test_continue_opens_the_last_visited_lesson(memlab_home):
    # Given a learner who last visited lesson 03 (not the first lesson, which "continue" would
    # open anyway on a fresh start — that test could not fail)
    third = COURSE.lessons[2]
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for _ in range(2):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.lesson.id == third.id
    # a new session: "continue" goes back to it
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert f"Continue: {third.key}" in str(app.screen.query_one("#continue").label)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen)
        assert app.screen.lesson.id == third.id


async def test_help_opens_and_closes():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_command_palette_lists_the_lab_actions():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_first_lesson(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Run experiment", "Run it yourself", "Cancel run", "Next lesson",
                       "Previous lesson", "Course map", "Calibration", "Help", "Reset progress",
                       "Quit"):
            assert wanted in titles


OOM = COURSE.find("out-of-memory")  # by its number as the course map shows it (not its folder's)


@pytest.mark.parametrize("query, lesson_id", [  # by words: the full suite's (~3 s each)
    (OOM.key, OOM.id), pytest.param("out of memory", OOM.id, marks=pytest.mark.slow),
    pytest.param("checkpoint", "gradient-checkpointing", marks=pytest.mark.slow)])
@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_the_command_palette_opens_a_lesson_by_number_or_words(query, lesson_id):
    from textual.command import CommandPalette

    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*query)
        target = COURSE.find(lesson_id)
        wanted = f"Lesson {target.key} · {target.title}"

        def hits() -> list[str]:
            return [str(o.prompt) for o in app.screen.query_one("CommandList").options]

        await wait_until(pilot, lambda: any(wanted in h for h in hits()), tries=300)
        if query.isdigit():
            assert wanted in hits()[0]  # a number is that lesson, first
        commands = app.screen.query_one("CommandList")
        commands.highlighted = next(i for i, h in enumerate(hits()) if wanted in h)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen) and app.screen.lesson.id == lesson_id


async def test_below_minimum_size_says_so_and_recovers():
    app = make_app()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        text = text_of(app.screen, "#too-small-text")
        assert "80×24" in text and "60×20" in text
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
