"""`CutMarks`: a line of code wider than its view says so, with `›` at the view's right edge.

Code is never wrapped (a wrapped line reads as two lines of different code) and never cut
silently: it scrolls sideways (→, shift+wheel), and while a line goes on past the view's right
edge its row ends in `›`. The marks are a column docked to the right of the scrolling view, so
they stay put while the code scrolls under them, and follow the scroll and the view's width.

    view = HorizontalScroll(Static(code), CutMarks(code))   # any view that scrolls sideways
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual.widget import Widget

MARK = "›"
WIDE = 10_000


def line_widths(console, renderable) -> list[int]:
    """The width of each line `renderable` draws, unwrapped (trailing blanks left out). Code is
    measured from its text (rendering a long file twice, highlighted, costs a tenth of a second
    each time a variant is marked); anything else is drawn once."""
    if isinstance(renderable, Group):
        return [w for r in renderable.renderables for w in line_widths(console, r)]
    if isinstance(renderable, Syntax):
        lines = renderable.code.expandtabs(renderable.tab_size).split("\n")
        gutter = 0
        if renderable.line_numbers:  # Rich's: the widest number, and its margin
            gutter = len(str(renderable.start_line + len(lines) - 1)) + 3
        return [gutter + cell_len(line.rstrip()) for line in lines]
    if isinstance(renderable, (str, Text)):
        text = renderable.plain if isinstance(renderable, Text) else renderable
        return [cell_len(line.rstrip()) for line in text.split("\n")]
    lines = console.render_lines(renderable, console.options.update_width(WIDE), pad=False)
    return [cell_len("".join(s.text for s in line if not s.control).rstrip()) for line in lines]


class CutMarks(Widget):
    DEFAULT_CSS = """
    CutMarks { dock: right; width: 1; height: auto; color: $warning; }
    CutMarks.-tall { height: 100%; }
    """

    def __init__(self, renderable, offset: int = 0, tall: bool = False, *, id: str | None = None):
        """`offset`: columns drawn before the code (a padding); `tall`: the view also scrolls
        up and down (the marks follow it: a column as high as the view)."""
        super().__init__(id=id, classes="-tall" if tall else None)
        self.renderable, self.pad = renderable, offset
        self.widths: list[int] = []

    def on_mount(self) -> None:
        self.measure()
        self.watch(self.parent, "scroll_x", lambda _x: self.refresh())
        self.watch(self.parent, "scroll_y", lambda _y: self.refresh())

    def measure(self, renderable=None) -> None:
        if renderable is not None:
            self.renderable = renderable
        self.widths = [w + self.pad for w in line_widths(self.app.console, self.renderable)]
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.widths)

    def cut_rows(self) -> list[int]:
        """The lines (0-based) that go on past the view's right edge now."""
        view = self.parent
        right = int(view.scroll_x) + view.scrollable_content_region.width - self.size.width
        return [i for i, w in enumerate(self.widths) if w > right]

    def render(self) -> Text:
        cut, top = set(self.cut_rows()), int(self.parent.scroll_y)
        rows = range(top, top + max(1, self.size.height))
        return Text("\n".join(MARK if i in cut else " " for i in rows))


__all__ = ["CutMarks", "MARK", "line_widths"]
