"""Every screen at 80×24 and 160×48 loses nothing a learner needs (issue 36).

Table-driven over what is on disk, in two parts that share their checks:

- every lesson (`test_every_lesson_is_drawn_whole`, no app: cheap): what its screens draw — the
  Lesson tab's text, the quiz, its H200 recording's tables, notes and failures on the Results
  tab, the status line while it plays and after, the Inspector's frames — at the widths the app
  gives them at 80 columns, the narrowest (every check is stricter the narrower the place);
- the screens themselves, in the app at 80×24 and 160×48 (`test_the_screens_fit`): the course
  map, the five tabs of lessons chosen for what they hold (wide code, quoted OOM errors, nine
  variants), the challenges, the predictions, help, the playground; every widget drawn is
  looked at the width it has, and the widths the first part assumes are checked.

Either fails when

- a table drops a column a learner needs (every column but those it says it can spare), or a
  table wider than its place hides columns off the edge,
- a line of code is cut without a visible marker (code scrolls sideways: a line that goes on
  past the right edge ends in `›` there),
- a word breaks mid-token (prose and table cells wrap at spaces; "zero_grad(set_to_none=Fals"
  / "e)" is a failure),
- a status line loses its tail (it abbreviates: the status line picks the longest form that
  fits, and its shortest form must fit).

Where each place gives way: prose and table cells wrap at words; tables abbreviate headers,
then leave out what they say they can spare, then split into parts with the key column in each;
code scrolls sideways with the `›` marker; one-line texts (status, counters, the header) choose
a shorter form; the Inspector's frame shortens its path's head ("…/loss_utils.py:47").
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console, Group
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text
from textual.widgets import DataTable, Static

from lab.course.reference import REFERENCE_DIR, load_reference
from lab.tui.widgets.code_view import CodeView
from lab.tui.widgets.cut_marks import MARK
from lab.tui.widgets.fit import Fit, FitTable, natural_width
from lab.tui.widgets.lesson_text import CodeBlock
from lab.tui.widgets.quiz import ChoiceButton
from lab.tui.widgets.status import StatusText

from tui_helpers import COURSE, make_app, run_and_wait, screen_text, wait_until

SIZES = [(80, 24), (160, 48)]
WIDE = 10_000


def console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False,
                   record=True)


def rendered(renderable, width: int) -> str:
    c = console(width)
    c.print(renderable)
    return c.export_text()


def cell_text(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


# ---- the checks, one renderable at the width it is drawn at -----------------------------------
def table_problems(t: FitTable, width: int) -> list[str]:
    c = console(width)
    tables = t._tables(c, c.options.update_width(width))
    out = []
    headers = {str(col.header) for table in tables for col in table.columns}
    for col in t.columns:
        if col.drop == 0 and col.header and col.header not in headers and (
                col.short or col.header) not in headers:
            out.append(f"table {t.heading!r} dropped the column {col.header!r} at {width}")
    for table in tables:  # every cell shown is whole: each of its words on one line
        lines = rendered(table, width).splitlines()
        for col in table.columns:
            for cell in col._cells:
                for token in cell_text(cell).split():
                    if not any(token in line for line in lines):
                        out.append(f"table {t.heading!r}: {token!r} is cut or broken at "
                                   f"{width}")
    return out


def token_problems(renderable, width: int, where: str) -> list[str]:
    """Words of `renderable` drawn at `width` that are not words of it drawn unwrapped: a token
    folded onto two lines, or cut."""
    narrow = rendered(renderable, width).split()
    wide = set(rendered(renderable, WIDE).split())
    return [f"{where}: {t!r} breaks mid-token at {width}" for t in narrow
            if t not in wide and any(ch.isalnum() for ch in t)]  # a rule is as wide as its place


def renderable_problems(r, width: int, where: str, one_line: bool = False) -> list[str]:
    c = console(width)
    if isinstance(r, Fit):
        chosen = r.pick(c, c.options.update_width(width))
        out = renderable_problems(chosen, width, where)
        if one_line and natural_width(c, c.options, chosen) > width:
            out.append(f"{where}: the line loses its tail at {width}: "
                       f"{rendered(chosen, WIDE).strip()!r}")
        return out
    if isinstance(r, Group):
        return [p for x in r.renderables for p in renderable_problems(x, width, where)]
    if isinstance(r, FitTable):
        return table_problems(r, width)
    if isinstance(r, (Text, str, Markdown, Table)):
        out = token_problems(r, width, where)
        if one_line and natural_width(c, c.options, r) > width:
            out.append(f"{where}: the line loses its tail at {width}")
        return out
    return []


def code_problems(view, lines: list[str]) -> list[str]:
    """Every visible row of a sideways-scrolling code view: its line goes on past the right edge
    exactly where the row ends in the marker."""
    static = view.query_one(Static)
    full = rendered(static.content, WIDE).splitlines()
    region = view.region
    shown = region  # what of it is on screen: inside every scrolling view around it
    for above in view.ancestors:
        if hasattr(above, "scrollable_content_region"):
            shown = shown.intersection(above.scrollable_content_region)
    out = []
    right = int(view.scroll_x) + view.scrollable_content_region.width - 1  # the marks' column
    pad = 1 if isinstance(view, CodeBlock) else 0
    for i in range(region.height - (1 if view.show_horizontal_scrollbar else 0)):
        k = i + int(view.scroll_y)
        y = region.y + i
        if k >= len(full) or y >= len(lines):
            break
        if not shown.y <= y < shown.bottom:
            continue
        cut = len(full[k].rstrip()) + pad > right
        mark = lines[y][region.x + region.width - 1 - view.scrollbar_size_vertical:][:1]
        if cut != (mark == MARK):
            out.append(f"code line {k + 1} {'cut without' if cut else 'marked but not cut, with'} "
                       f"the {MARK} marker: {full[k].strip()[:50]!r}")
    return out


def screen_problems(app) -> list[str]:
    """What the screen on top loses, widget by widget."""
    lines = screen_text(app).splitlines()
    out = []
    for w in app.screen.query("*"):
        if not w.display or not w.region or w.region.width == 0:
            continue
        width = w.content_region.width
        name = f"{type(w).__name__}#{w.id}" if w.id else type(w).__name__
        if isinstance(w, (CodeBlock, CodeView)):
            out += code_problems(w, lines)
        elif isinstance(w, StatusText):
            out += renderable_problems(w.content, width, name, one_line=True)
        elif isinstance(w, Static):
            out += renderable_problems(w.content, width, name, one_line=w.region.height == 1
                                       and isinstance(w.content, Fit))
        elif isinstance(w, ChoiceButton):
            longest = max(str(w.label).split(), key=len)
            if len(longest) > width - 4:  # "(•) " before the label
                out.append(f"{name}: {longest!r} breaks mid-token at {width}")
        elif isinstance(w, DataTable) and w.columns:
            if w.virtual_size.width > w.scrollable_content_region.width:
                out.append(f"{name}: {w.virtual_size.width} columns wide in "
                           f"{w.scrollable_content_region.width}: its right columns are cut off")
    return out


FOUND: list[str] = []


def assert_fits(app, what: str) -> None:
    """What the screen loses, kept: the test says everything it found at the end."""
    FOUND.extend(f"{what} at {app.size.width}×{app.size.height}: {p}"
                 for p in dict.fromkeys(screen_problems(app)))


# ---- every lesson on disk, drawn as its screens draw it (no app: cheap) ------------------------
# the widths the screens give these texts at 80 and at 160 columns (a scrolling view's bar and
# padding taken off), or a little less (the quiz with its scrollbar shown): test_the_screens_fit
# below checks that the app gives at least these
WIDTHS = {80: {"text": 76, "results": 76, "quiz": 70, "status": 78, "running": 53, "frame": 24},
          160: {"text": 156, "results": 156, "quiz": 150, "status": 158, "running": 133,
                "frame": 104}}


def lesson_problems(lesson, columns: int) -> list[str]:
    from lab.tui.lesson_model import (Begin, Finished, LessonRun, RunPlan, Settings, Streamed,
                                      VariantDone, fold)
    from lab.tui.lesson_page import lesson_markdown
    from lab.tui.lesson_words import idle_words, outcome_words, progress_forms
    from lab.tui.provenance import RECORDING
    from lab.tui.result_set import ResultSet
    from lab.tui.widgets.lesson_text import split_code
    from lab.tui.widgets.results import lesson_notes
    from lab.tui.widgets.tables import (check_notes, checks_table, diff_tables, failure_box,
                                        summary_table)
    from lab.tui.widgets.inspector import fit_stack

    w = WIDTHS[columns]
    out = []
    for kind, text, _ in split_code(lesson_markdown(lesson, revealed=True)):
        if kind == "prose":
            out += renderable_problems(Markdown(text), w["text"], "the lesson text")
    for q in lesson.quiz:
        for text in (q.question, q.explain, *q.choices):
            out += renderable_problems(Text(text), w["quiz"], "the quiz")
    recordings = load_reference(lesson.id)
    names = [v.name for v in lesson.variants if v.name in recordings]
    state = fold(LessonRun.empty(v.name for v in lesson.variants),
                 Settings("auto", "seed", "sim", main_recording=bool(names)))
    out += renderable_problems(Fit(*(Text("".join(t for t, _ in f)) for f in idle_words(state))),
                               w["status"], "the status line", one_line=True)
    if not names:
        return out
    rs = ResultSet([recordings[n] for n in names], RECORDING)
    for part in (summary_table(lesson, rs), diff_tables(lesson, rs), checks_table(lesson, rs),
                 Text("\n".join(lesson_notes(rs.results, check_notes(rs)))),
                 *(failure_box(r, rs.source)[0] for r in rs.results if not r.ok)):
        if part is not None:
            out += renderable_problems(part, w["results"], "the results")
    # the status line while the lesson plays, and after it
    plan = RunPlan(tuple(names), "cuda", "seed", recorded=True)
    state = fold(state, Begin(plan))
    for i, n in enumerate(names):
        r = recordings[n]
        for ev in ({"type": "queued"}, {"type": "sample", "events": 1, "phase": "forward 0",
                                        "live_bytes": r.peak.bytes}):
            state = fold(state, Streamed(n, i, len(names), ev))
        out += renderable_problems(Fit(*(Text("".join(t for t, _ in f) + " · 12 s")
                                         for f in progress_forms(state))),
                                   w["running"], "the running status line", one_line=True)
        state = fold(state, VariantDone(r, i, len(names)))
    state = fold(state, Finished(plan, rs.results, False))
    out += renderable_problems(Fit(*(Text("".join(t for t, _ in f))
                                     for f in outcome_words(state.outcome, True))),
                               w["status"], "the status line after the playback", one_line=True)
    # the inspector keeps every frame's file:line: a long path loses its head, never its tail
    for r in rs.results:
        for b in r.blocks:
            if b.stack and ":" in b.stack:
                where = b.stack.split(" ")[0]
                shown = fit_stack(b.stack, w["frame"]).split(" ")[0].lstrip("…")
                if not (shown and where.endswith(shown) and ":" in shown):
                    out.append(f"the inspector loses {where!r}: {shown!r}")
    return out


@pytest.mark.parametrize("lesson", COURSE.lessons, ids=lambda l: l.id)
def test_every_lesson_is_drawn_whole(lesson, columns=80):
    """At 80 columns, the narrowest: every check here is stricter the narrower the place (the
    screens at 160×48 are looked at in the app, below)."""
    problems = lesson_problems(lesson, columns)
    assert not problems, f"lesson {lesson.key} ({lesson.id}) at {columns} columns:\n" + \
        "\n".join(dict.fromkeys(problems))


# ---- the screens, in the app ---------------------------------------------------------------
# lessons whose screens hold what the test looks for, each with its H200 recording played back:
# code blocks with lines wider than 80 columns (07), nine variants, OOM errors quoted, a quiz of
# long choices (25); at 160×48 the widest of them (25). Every lesson's texts and tables are
# checked without the app, above: this part is about the widgets, and costs seconds a screen.
APP_LESSONS = {80: ("inference-no-grad", "memory-budget"), 160: ("memory-budget",)}
OTHER_SCREENS = {80: (("x", "the challenges"), ("k", "the predictions"),
                      ("question_mark", "help")),
                 160: (("x", "the challenges"), ("question_mark", "help"))}


def width_of(app, tab: str) -> dict[str, int]:
    """The width the lesson screen gives a text on `tab` (WIDTHS above is checked against it)."""
    q = app.screen.query_one
    found = {"status": q("StatusText").content_region.width}
    if tab == "1":
        found["text"] = q("LessonText").query("Static").first().content_region.width
    if tab == "3":
        found["results"] = q("#summary").content_region.width
    if tab == "5":
        found["quiz"] = q(".question").content_region.width
    return found


@pytest.mark.slow  # ~15 s a size on 2 idle cores (Textual's layout): the full suite runs it
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_screens_fit(size, memlab_home):
    FOUND.clear()
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert_fits(app, "the course map")
        for lesson_id in APP_LESSONS[size[0]]:
            lesson = COURSE.find(lesson_id)
            app.open_lesson(lesson)
            await pilot.pause()
            for key, tab in (("1", "its text"), ("2", "its experiment"), ("r", ""),
                             ("3", "its results"), ("4", "the inspector"), ("5", "the quiz")):
                if key == "r":
                    if app.screen.state.main_recording:  # the H200 recording, played at once
                        await run_and_wait(pilot, "r")
                    continue
                await pilot.press(key)
                await pilot.pause()
                assert_fits(app, f"lesson {lesson.key} ({lesson.id}), {tab}")
                if lesson_id == "memory-budget":
                    measured = width_of(app, key)  # the lesson test draws no wider than these
                    assert all(w >= WIDTHS[size[0]][k] for k, w in measured.items()), \
                        f"the widths test_every_lesson_is_drawn_whole draws at: {measured}"
        await pilot.press("escape")
        await pilot.pause()
        for key, what in OTHER_SCREENS[size[0]]:
            await pilot.press(key)
            await pilot.pause()
            assert_fits(app, what)
            await pilot.press("escape")
            await pilot.pause()
        if size[0] == 80:
            await pilot.press("g")
            await wait_until(pilot, lambda: "Loading" not in screen_text(app), tries=500)
            assert_fits(app, "the playground")
    assert not FOUND, f"{len(FOUND)} problems:\n" + "\n".join(FOUND)
