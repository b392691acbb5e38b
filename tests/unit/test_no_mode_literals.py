"""Execution choices live in the backends and the one mode rule (issue 21).

Outside lab/measure/modes.py, lab/measure/backends/ and lab/measure/backends/sim.py, no code
compares a mode against its name (`mode == "cuda"`, `r.mode in ("sim", "cpu")`): it asks what
the mode means (`mode_info(mode).on_gpu`, `RunResult.simulated`, `RunRequest.mode_info.timed`).
A device's type (`t.device.type == "cuda"`) is not a mode and is not checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lab import python_source
from lab.measure.modes import MODES

from ..conftest import ROOT

LAB = ROOT / "lab"
ALLOWED = {LAB / "measure" / "modes.py", LAB / "measure" / "sim" / "backend.py",
           *(LAB / "measure" / "backends").glob("*.py")}
# what a mode is called where it is compared (a device's `type` is a device, not a mode)
MODE_NAMES = ("mode", "requested", "asked", "device_state")


def _named_like_a_mode(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) \
        else None
    return bool(name) and any(n in name.lower() for n in MODE_NAMES)


def _mode_literals(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and node.value in MODES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in MODES}
    return set()


def mode_comparisons(source: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(python_source.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        literals = set().union(*map(_mode_literals, operands))
        if literals and any(_named_like_a_mode(o) for o in operands):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_the_check_finds_what_it_must():
    src = ('a = mode == "cuda"\nb = r.mode in ("sim", "cpu")\nc = args.mode != "sim"\n'
           'd = t.device.type == "cuda"\ne = self.device_state == "cuda"\nf = x == "sim"\n')
    assert [line for line, _ in mode_comparisons(src)] == [1, 2, 3, 5]


@pytest.mark.parametrize("path", sorted(p for p in LAB.rglob("*.py") if p not in ALLOWED),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_mode_name_compared_outside_the_backends(path: Path):
    found = mode_comparisons(path.read_text())
    assert not found, (f"{path.relative_to(ROOT)} decides by a mode's name; ask "
                       f"lab.measure.modes.mode_info(mode) or the result's on_gpu/simulated/"
                       f"timed instead: {found}")


def test_modes_are_defined_once():
    hits = [p for p in LAB.rglob("*.py")
            if any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MODES"
                                                     for t in n.targets)
                   for n in ast.walk(python_source.parse(p.read_text())))]
    assert hits == [LAB / "measure" / "modes.py"]
