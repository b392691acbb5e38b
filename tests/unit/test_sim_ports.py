"""The table of upstream code the simulator follows (lab/measure/sim/ports.py) stays true to the
modules on disk: each row's module exists and names its upstream file; each module that cites
an upstream C++ / CUDA source is a row."""

from __future__ import annotations

import ast
import re

from lab import python_source
from lab.measure.sim.ports import PORTS

from ..conftest import ROOT

SIM = ROOT / "lab" / "measure" / "sim"
UPSTREAM = re.compile(r"\b(?:c10|aten|torch/csrc)/[\w/]+\.(?:cpp|cuh|cu|h)\b")


def _docstring(module: str) -> str:
    return ast.get_docstring(python_source.parse((SIM / f"{module}.py").read_text())) or ""


def _source(module: str) -> str:
    return (SIM / f"{module}.py").read_text()


def test_every_row_names_a_module_that_cites_its_upstream_file():
    assert PORTS
    for p in PORTS:
        assert (SIM / f"{p.module}.py").is_file(), p.module
        name = p.upstream.split("/")[-1]
        assert name in _source(p.module), f"{p.module}.py does not name {p.upstream}"
        assert p.what and p.read_in


def test_every_module_that_cites_upstream_code_is_in_the_table():
    rows = {p.module for p in PORTS}
    modules = [path.relative_to(SIM).with_suffix("").as_posix() for path in SIM.rglob("*.py")]
    citing = sorted(m for m in modules if m != "ports" and UPSTREAM.search(_docstring(m)))
    assert citing and set(citing) <= rows, f"add to lab/measure/sim/ports.py: {set(citing) - rows}"
