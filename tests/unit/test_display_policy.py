"""One display policy: lab.tui formats no number itself (issue 36).

Every number on screen is written by lab.report (units, rows, provenance), so the app, `memlab
run` and the exports round the same value the same way (the app once said "−5%" where the CLI
said "−4.5%", and "1 min 15 s" where it said "75.00 s"). A fitness test over the source, not a
list of functions: every module under lab/tui is parsed, and a number format anywhere in it —
a format spec with a precision, a type or grouping (`{x:.2f}`, `{n:,}`, `{f:.0%}`, `{v:g}`),
`format()`, `"%d" % n`, `"{:.1f}".format(x)` — fails it. Alignment alone (`{name:<{width}}`)
is layout and stays.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import lab.tui
from lab import python_source

TUI = Path(lab.tui.__file__).parent
MODULES = sorted(TUI.rglob("*.py"))
# [[fill]align][sign][z][#][0][width][grouping][.precision][type]: only fill, align and width may
# appear; anything from the sign on formats a number
LAYOUT_ONLY = re.compile(r"^(.?[<>^=])?\d*$|^(.?[<>^=])?\{\}$")


def spec_text(spec: ast.JoinedStr) -> str:
    """A format spec as text, a nested field written as "{}" ("<{width}" -> "<{}")."""
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in spec.values)


def number_formats(source: str) -> list[tuple[int, str]]:
    """(line, what) for every place `source` formats a number itself."""
    found = []
    for node in ast.walk(python_source.parse(source)):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            spec = spec_text(node.format_spec)
            if not LAYOUT_ONLY.match(spec):
                found.append((node.lineno, f"{{…:{spec}}}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "format":
            found.append((node.lineno, "format()"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "format" and isinstance(node.func.value, ast.Constant) \
                and isinstance(node.func.value.value, str):
            found.append((node.lineno, "str.format()"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) \
                and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            found.append((node.lineno, "% formatting"))
    return found


def test_the_fitness_rule_catches_each_way_of_formatting_a_number():
    caught = number_formats('f"{x:.2f} {n:,} {p:.0%} {v:g} {w:>10.1f}"\n'
                            'format(x, ".1f")\n"%d B" % n\n"{:.1f}".format(x)\n')
    assert sorted(what for _, what in caught) == sorted([
        "{…:.2f}", "{…:,}", "{…:.0%}", "{…:g}", "{…:>10.1f}", "format()", "% formatting",
        "str.format()"])
    assert number_formats('f"{name:<{width}} {cell:>10} {x}"\n') == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(TUI)))
def test_lab_tui_formats_no_number_itself(path):
    found = number_formats(path.read_text(encoding="utf-8"))
    assert not found, (f"{path.relative_to(TUI.parent.parent)} formats numbers itself at "
                       + ", ".join(f"line {n} ({what})" for n, what in found)
                       + ": use lab.report (units, rows) so the app and the CLI agree")
