"""`LessonText`: the lesson tab's text, prose wrapped to the width, code never wrapped.

Prose is Rich's Markdown in one `Static` per stretch between code blocks (a handful of nodes,
not the hundreds Textual's Markdown widget makes, so switching tabs stays instant). Each code
block is its own row that scrolls sideways: at 80 columns a quoted PyTorch error or a long line
of code is read by scrolling, not wrapped into a different-looking line, and a line that goes
on past the right edge ends in `›` there (`CutMarks`). A table (the recorded numbers a lesson
cites) does the same: its row scrolls, and no cell is cut. ←/→ scroll every code block of the text
at once, so nothing needs focusing first; the mouse (shift+wheel) works too.
"""

from __future__ import annotations

import re

from rich import box
from rich.markdown import Markdown as RichMarkdown
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalScroll, VerticalScroll
from textual.widgets import Static

from .cut_marks import CutMarks
from .fit import natural_width

FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
TABLE = re.compile(r"(?:^[ \t]*\|.*\|[ \t]*(?:\n|$))+", re.M)  # a Markdown table's lines
INLINE = re.compile(r"\*\*(.+?)\*\*|`(.+?)`")


def split_code(markdown: str) -> list[tuple[str, str, str]]:
    """[("prose", text, ""), ("code", source, language), ("table", lines, ""), ...] in
    reading order."""
    out, at = [], 0
    for m in FENCE.finditer(markdown):
        out += _prose_and_tables(markdown[at:m.start()])
        out.append(("code", m.group(2).rstrip("\n"), m.group(1) or "text"))
        at = m.end()
    return out + _prose_and_tables(markdown[at:])


def _prose_and_tables(text: str) -> list[tuple[str, str, str]]:
    out, at = [], 0
    for m in TABLE.finditer(text):
        if text[at:m.start()].strip():
            out.append(("prose", text[at:m.start()], ""))
        out.append(("table", m.group(0).strip("\n"), ""))
        at = m.end()
    if text[at:].strip():
        out.append(("prose", text[at:], ""))
    return out


def inline(cell: str) -> Text:
    """A Markdown table cell's **bold** and `code`, the rest as it is."""
    text, at = Text(), 0
    for m in INLINE.finditer(cell):
        text.append(cell[at:m.start()])
        text.append(m.group(1) or m.group(2), style="bold" if m.group(1) else "cyan")
        at = m.end()
    text.append(cell[at:])
    return text


def markdown_table(lines: str) -> Table:
    """A Markdown table as a Rich table that never cuts a cell (its row scrolls instead)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines.splitlines()]
    head, rule, body = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for i, h in enumerate(head):
        right = i < len(rule) and rule[i].endswith(":")
        table.add_column(inline(h), justify="right" if right else "left", no_wrap=True)
    for r in body:
        table.add_row(*(inline(c) for c in r[:len(head)]))
    return table


class CodeBlock(HorizontalScroll, can_focus=False):
    """A code block (or a table: `language` "table"), one row that scrolls sideways."""

    DEFAULT_CSS = """
    CodeBlock { height: auto; margin: 0 0 1 2; background: $boost; scrollbar-size-horizontal: 1; }
    CodeBlock.-table { background: transparent; margin: 0 0 1 0; }
    CodeBlock > Static { width: auto; padding: 0 1; }
    """

    def __init__(self, code: str, language: str):
        super().__init__(classes="-table" if language == "table" else None)
        self.code, self.language = code, language

    def compose(self) -> ComposeResult:
        dark = getattr(self.app, "current_theme", None)
        theme = "monokai" if dark is None or dark.dark else "default"
        syntax = markdown_table(self.code) if self.language == "table" else Syntax(
            self.code, self.language, theme=theme, word_wrap=False, background_color="default")
        static = Static(syntax)
        # its own width (+ padding), so the row scrolls to the end of a long line
        static.styles.width = natural_width(self.app.console, self.app.console.options,
                                            syntax) + 2
        yield static
        yield CutMarks(syntax, offset=1)


class LessonText(VerticalScroll):
    BINDINGS = [Binding("left", "sideways(-8)", "◀ code", show=False),
                Binding("right", "sideways(8)", "code ▶", show=False)]
    DEFAULT_CSS = """
    LessonText { padding: 0 1; }
    LessonText > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.markdown = ""

    def set_markdown(self, markdown: str) -> None:
        if markdown == self.markdown:
            return
        self.markdown = markdown
        y = self.scroll_y
        self.remove_children()
        self.mount_all([Static(RichMarkdown(text)) if kind == "prose" else
                        CodeBlock(text, "table" if kind == "table" else language)
                        for kind, text, language in split_code(markdown)])
        self.call_after_refresh(self.scroll_to, y=y, animate=False)

    def action_sideways(self, step: int) -> None:
        for block in self.query(CodeBlock):
            block.scroll_relative(x=step, animate=False)


__all__ = ["CodeBlock", "LessonText", "markdown_table", "split_code"]
