"""80×24 is a first-class size (issue 25): code scrolls sideways without tabbing into it, the
technique's code is shown for a variant, a run's tab change survives the focus, the course map
says what was done, Ctrl+S says where the screenshot went."""

from __future__ import annotations

import pytest
from textual.widgets import TabbedContent

from lab.course.reference import REFERENCE_DIR
from lab.tui.widgets import CodeView
from lab.tui.widgets.lesson_text import CodeBlock, LessonText

from tui_helpers import COURSE, make_app, notices, run_and_wait, wait_until


@pytest.mark.slow  # ~3 s: two lessons at 80×24 with a playback
async def test_code_scrolls_sideways_and_shows_the_techniques_code_at_80_columns():
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.open_lesson(COURSE.find("08"))
        await pilot.pause()
        screen = app.screen
        # Given the Experiment tab, when → is pressed (no Tab first), the code scrolls sideways
        await pilot.press("2")
        await pilot.pause()
        code = screen.query_one(CodeView)
        assert app.focused is code and code.max_scroll_x > 0  # a line wider than 80 columns
        await pilot.press("right")
        await pilot.pause()
        assert code.scroll_x > 0
        # Tab onto bf16's box: the autocast block it runs is on screen, and bf16 will run first
        while app.focused is None or app.focused.id != "v-bf16":
            await pilot.press("tab")
        await pilot.pause()
        assert screen.chosen == "bf16" and code.marked == "bf16"
        assert [s.name for s in code.snippets] == ["autocast", "train_step"]
        assert "torch.autocast" in code.snippets[0].source
        # the run switches to Results, and the focused box (now hidden) does not switch back
        await run_and_wait(pilot, "r", prediction="12")
        assert screen.query_one(TabbedContent).active == "results"
        # the lesson text: a long line of a code block scrolls with → too, never wrapped
        app.open_lesson(COURSE.find("04"))
        await pilot.pause()
        text = app.screen.query_one(LessonText)
        await wait_until(pilot, lambda: bool(text.query(CodeBlock)))
        blocks = list(text.query(CodeBlock))
        wide = [b for b in blocks if b.max_scroll_x > 0]
        assert wide, "lesson 04 has a line of code wider than 80 columns"
        await pilot.press("right")
        await pilot.pause()
        assert all(b.scroll_x > 0 for b in wide)


@pytest.mark.slow  # ~2 s: a playback and a screenshot
async def test_the_course_map_says_what_was_done_and_ctrl_s_says_where(memlab_home):
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#lessons")
        assert "not started" in str(table.get_row_at(0)[1])
        app.open_lesson(COURSE.lessons[0])
        await pilot.pause()
        await run_and_wait(pilot, "r", prediction="4.4")  # played back only: seen
        await pilot.press("escape")
        await pilot.pause()
        assert "◐ seen" in str(table.get_row_at(0)[1])
        assert "−0.0%" in str(table.get_row_at(0)[2]) or "%" in str(table.get_row_at(0)[2])
        app.progress.commit_prediction(COURSE.lessons[1].id, 3.0)
        app.refresh_home()
        await pilot.pause()
        assert "◔ predicted" in str(table.get_row_at(1)[1])
        # the whole counter is on screen at 80 columns, not cut
        from tui_helpers import screen_text

        assert f"0/{len(COURSE.lessons)} quizzes passed" in screen_text(app)
        await pilot.press("ctrl+s")
        await pilot.pause()
        shots = list((memlab_home / "screenshots").glob("*.svg"))
        assert len(shots) == 1
        assert any(str(shots[0]) in n.message for n in notices(app))
