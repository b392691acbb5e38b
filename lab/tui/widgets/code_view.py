"""`CodeView`: the lesson's experiment.py, syntax highlighted, one variant's function marked."""

from __future__ import annotations

import ast

from rich.syntax import Syntax
from textual.containers import VerticalScroll
from textual.widgets import Static


def function_lines(code: str, name: str) -> tuple[int, int] | None:
    """First and last line (1-based) of the top-level `def name`, decorators included."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return start, node.end_lineno or node.lineno
    return None


class CodeView(VerticalScroll):
    DEFAULT_CSS = """
    CodeView { height: 1fr; }
    CodeView > Static { width: auto; }
    """

    def __init__(self, code: str, *, id: str | None = None):
        super().__init__(id=id)
        self.code = code
        self.marked: str | None = None
        self.span: tuple[int, int] | None = None

    def compose(self):
        yield Static(self._syntax(), id="code")

    def _syntax(self) -> Syntax:
        dark = getattr(self.app, "current_theme", None)
        theme = "monokai" if dark is None or dark.dark else "default"
        lines = set(range(self.span[0], self.span[1] + 1)) if self.span else set()
        syntax = Syntax(self.code, "python", theme=theme, line_numbers=True, word_wrap=False,
                        highlight_lines=lines, background_color="default")
        if self.span:
            syntax.stylize_range("on #303a46" if theme == "monokai" else "on #dde8f5",
                                 (self.span[0], 0), (self.span[1] + 1, 0))
        return syntax

    def mark(self, variant: str | None, scroll: bool = True) -> None:
        """Highlight `def variant(...)` and bring it into view."""
        self.marked = variant
        self.span = function_lines(self.code, variant) if variant else None
        self.query_one("#code", Static).update(self._syntax())
        if scroll and self.span:
            y = max(0, self.span[0] - 3)
            self.call_after_refresh(lambda: self.scroll_to(y=y, animate=False))
