"""`CodeView`: the lesson's experiment.py, syntax highlighted, one variant's function marked,
and above it the technique's own code that variant runs (lab/tui/technique_code.py: the
autocast block and the GradScaler of `run_with(run, "bf16")`, the checkpoint call, ...).

It scrolls both ways (long lines are scrolled to, never wrapped, and a line that goes on past the
right edge ends in `›` there: `CutMarks`) and takes the focus when the Experiment tab opens, so
↑/↓/←/→ and the mouse scroll it without tabbing into it first.
"""

from __future__ import annotations

import ast

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual.containers import ScrollableContainer
from textual.widgets import Static

from lab import python_source
from ..technique_code import Snippet, technique_snippets
from .cut_marks import CutMarks
from .fit import natural_width


def function_lines(code: str, name: str) -> tuple[int, int] | None:
    """First and last line (1-based) of the top-level `def name`, decorators included."""
    try:
        tree = python_source.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return start, node.end_lineno or node.lineno
    return None


class CodeView(ScrollableContainer, can_focus=True):
    DEFAULT_CSS = """
    CodeView { height: 1fr; }
    CodeView > Static { width: auto; }
    """

    def __init__(self, code: str, *, id: str | None = None):
        super().__init__(id=id)
        self.code = code
        self.marked: str | None = None
        self.span: tuple[int, int] | None = None
        self.snippets: list[Snippet] = []
        self._pending: bool | None = None  # marked while hidden: drawn when shown (scroll?)

    def compose(self):
        code = self._render_code()
        static = Static(code, id="code")
        static.styles.width = natural_width(self.app.console, self.app.console.options, code)
        yield static
        yield CutMarks(code, tall=True)

    def _theme(self) -> tuple[str, str]:
        dark = getattr(self.app, "current_theme", None)
        if dark is None or dark.dark:
            return "monokai", "on #303a46"
        return "default", "on #dde8f5"

    def _render_code(self) -> Group:
        theme, mark = self._theme()
        parts = []
        for s in self.snippets:
            parts.append(Text.assemble((f"What {self.marked} runs: ", "bold"),
                                       (f"{s.name}() in {s.path}", "italic")))
            syntax = Syntax(s.source, "python", theme=theme, line_numbers=True, word_wrap=False,
                            start_line=s.start, highlight_lines=set(s.marked),
                            background_color="default")
            for line in s.marked:
                syntax.stylize_range(mark, (line - s.start + 1, 0), (line - s.start + 2, 0))
            parts += [syntax, Text("")]
        if parts:
            parts.append(Text(f"{self.marked}'s own code, in the lesson's experiment.py:",
                              style="bold"))
        lines = set(range(self.span[0], self.span[1] + 1)) if self.span else set()
        syntax = Syntax(self.code, "python", theme=theme, line_numbers=True, word_wrap=False,
                        highlight_lines=lines, background_color="default")
        if self.span:
            syntax.stylize_range(mark, (self.span[0], 0), (self.span[1] + 1, 0))
        parts.append(syntax)
        return Group(*parts)

    def _lines_above(self) -> int:
        """Lines drawn above experiment.py's line 1 (the technique's snippets)."""
        if not self.snippets:
            return 0
        return sum(len(s.source.splitlines()) + 2 for s in self.snippets) + 1

    def mark(self, variant: str | None, scroll: bool = True) -> None:
        """Highlight `def variant(...)`, show the technique code it runs, bring both into view.
        While the view is hidden (another tab), it is drawn when next shown: a run marks each
        variant as it starts, and highlighting a long file costs a tenth of a second."""
        self.marked = variant
        self.span = function_lines(self.code, variant) if variant else None
        self.snippets = technique_snippets(self.code, variant) if variant else []
        self._pending = scroll or bool(self._pending)
        if self.content_region.width:
            self._draw()

    def on_show(self) -> None:
        if self._pending is not None:
            self._draw()

    def _draw(self) -> None:
        scroll, self._pending = self._pending, None
        code = self._render_code()
        static = self.query_one("#code", Static)
        static.update(code)
        # as wide as its longest line, so the view scrolls sideways to it (width: auto would
        # clamp the code to the view and cut the line)
        static.styles.width = natural_width(self.app.console, self.app.console.options, code)
        self.query_one(CutMarks).measure(code)
        if scroll and self.span:
            y = 0 if self.snippets else max(0, self.span[0] - 3)
            self.call_after_refresh(lambda: self.scroll_to(x=0, y=y, animate=False))
