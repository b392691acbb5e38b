"""`LessonText`: the lesson tab's text, prose wrapped to the width, code never wrapped.

Prose is Rich's Markdown in one `Static` per stretch between code blocks (a handful of nodes,
not the hundreds Textual's Markdown widget makes, so switching tabs stays instant). Each code
block is its own row that scrolls sideways: at 80 columns a quoted PyTorch error or a long line
of code is read by scrolling, not wrapped into a different-looking line. ←/→ scroll every code
block of the text at once, so nothing needs focusing first; the mouse (shift+wheel) works too.
"""

from __future__ import annotations

import re

from rich.markdown import Markdown as RichMarkdown
from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalScroll, VerticalScroll
from textual.widgets import Static

from .fit import natural_width

FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def split_code(markdown: str) -> list[tuple[str, str, str]]:
    """[("prose", text, ""), ("code", source, language), ...] in reading order."""
    out, at = [], 0
    for m in FENCE.finditer(markdown):
        if markdown[at:m.start()].strip():
            out.append(("prose", markdown[at:m.start()], ""))
        out.append(("code", m.group(2).rstrip("\n"), m.group(1) or "text"))
        at = m.end()
    if markdown[at:].strip():
        out.append(("prose", markdown[at:], ""))
    return out


class CodeBlock(HorizontalScroll, can_focus=False):
    DEFAULT_CSS = """
    CodeBlock { height: auto; margin: 0 0 1 2; background: $boost; scrollbar-size-horizontal: 1; }
    CodeBlock > Static { width: auto; padding: 0 1; }
    """

    def __init__(self, code: str, language: str):
        super().__init__()
        self.code, self.language = code, language

    def compose(self) -> ComposeResult:
        dark = getattr(self.app, "current_theme", None)
        theme = "monokai" if dark is None or dark.dark else "default"
        syntax = Syntax(self.code, self.language, theme=theme, word_wrap=False,
                        background_color="default")
        static = Static(syntax)
        # its own width (+ padding), so the row scrolls to the end of a long line
        static.styles.width = natural_width(self.app.console, self.app.console.options,
                                            syntax) + 2
        yield static


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
        self.mount_all([Static(RichMarkdown(text)) if kind == "prose" else CodeBlock(text, language)
                        for kind, text, language in split_code(markdown)])
        self.call_after_refresh(self.scroll_to, y=y, animate=False)

    def action_sideways(self, step: int) -> None:
        for block in self.query(CodeBlock):
            block.scroll_relative(x=step, animate=False)


__all__ = ["CodeBlock", "LessonText", "split_code"]
