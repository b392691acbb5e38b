"""Private torch APIs only through lab/measure/torch_compat.py (issue 21) and, for sim's compiled
estimate's Dynamo and Inductor, its sibling torch_compat_compile.py (issue 41), in lab/ and in the
lessons' code (issue 35), but for the few a lesson teaches by name.

Parses every module of the package and fails on a use of an underscore module or attribute
reached from torch outside those two shim modules: imports of `torch.…._x` modules or `_x` names, attribute
chains from a name bound to torch (`torch._C…`, `dist._compute…` after `import torch.distributed
as dist`), and the private attributes of torch's objects the lab would otherwise touch
(`storage._cdata`, `op._schema`, …). Aten op names under `torch.ops` are not private APIs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lab import python_source
from lab.measure import torch_compat, torch_compat_compile

from ..conftest import ROOT

LAB = ROOT / "lab"
LESSONS = ROOT / "lessons"
# the shim modules of lab/measure: the only ones that may name private torch APIs (a literal:
# bench/layout_counts.py reads it from the checkout it measures)
SHIM_MODULES = ("torch_compat", "torch_compat_compile")
ALLOWED = {LAB / "measure" / f"{name}.py" for name in SHIM_MODULES}
SHIMS = (torch_compat, torch_compat_compile)
NOT_SHIMS = {"CHECKED", "CHECKED_ON", "PrivateApi"}  # what a shim module's __all__ holds besides
# What a lesson shows the learner by its torch name, as a script of theirs would call it:
# (lesson folder, the use private_uses reports) -> why it stays.
TAUGHT = {
    ("04-reading-snapshots", "torch.cuda.memory._record_memory_history"):
        "PyTorch's memory-snapshot guide (torch_cuda_memory) tells users to call it",
    ("04-reading-snapshots", "torch.cuda.memory._dump_snapshot"): "the same guide's dump",
    ("25-memory-budget", "torch.cuda.memory._set_allocator_settings"):
        "the fragmentation challenge's reference solution: the call its text asks for",
}
# private attributes of torch objects (storages, op overloads, tensors) the lab has needed
PRIVATE_ATTRS = {"_cdata", "_op_dk", "_schema", "_use_count"}


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for every private torch API `source` uses."""
    tree = python_source.parse(source)
    torch_names = {"torch"}  # names bound to torch or something of it
    ops_names: set[str] = set()  # names bound to torch.ops (aten op names: allowed)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "torch":
                    torch_names.add(a.asname or "torch")
                    if any(map(_private, parts)):
                        out.append((node.lineno, f"import {a.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch":
            for a in node.names:
                torch_names.add(a.asname or a.name)
                if any(map(_private, node.module.split("."))) or _private(a.name):
                    out.append((node.lineno, f"from {node.module} import {a.name}"))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            chain = _chain(node.value)
            if chain and chain[0] in torch_names | ops_names:
                (ops_names if "ops" in chain or chain[0] in ops_names else torch_names).add(
                    node.targets[0].id)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if id(node) in inner and node.attr not in PRIVATE_ATTRS:
            continue  # the outermost attribute of a chain reports it
        if node.attr in PRIVATE_ATTRS:
            out.append((node.lineno, f"….{node.attr}"))
            continue
        chain = _chain(node)
        if not chain or chain[0] not in torch_names or chain[0] in ops_names or "ops" in chain[:2]:
            continue
        if any(map(_private, chain[1:])):
            out.append((node.lineno, ".".join(chain)))
    return sorted(set(out))


def test_the_scanner_finds_what_it_must():
    src = ("import torch\nimport torch.distributed as dist\nfrom torch.utils._pytree import tree_map\n"
           "from torch.optim import optimizer as o\nA = torch.ops.aten\n"
           "x = torch._C._foo\ny = dist._bar\nz = o._types\nw = s._cdata\nok = A._softmax.default\n"
           "fine = torch.ops.aten._safe_softmax\nalso = torch.cuda.memory_allocated\n")
    found = [what for _, what in private_uses(src)]
    assert found == ["from torch.utils._pytree import tree_map", "torch._C._foo", "dist._bar",
                     "o._types", "…._cdata"]


def _scanned() -> list[Path]:
    return sorted([p for p in LAB.rglob("*.py") if p not in ALLOWED] + list(LESSONS.rglob("*.py")))


@pytest.mark.parametrize("path", _scanned(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_torch_api_outside_torch_compat(path: Path):
    folder = path.relative_to(LESSONS).parts[0] if path.is_relative_to(LESSONS) else None
    uses = [(line, what) for line, what in private_uses(path.read_text())
            if (folder, what) not in TAUGHT]
    assert not uses, (f"{path.relative_to(ROOT)} uses private torch APIs; add them to "
                      f"lab/measure/torch_compat.py (Dynamo's and Inductor's: to "
                      f"torch_compat_compile.py) and call them from there (a lesson: through "
                      f"it, or through `run`): {uses}")


def test_what_a_lesson_may_teach_by_name_is_still_there():
    for folder, what in TAUGHT:  # an entry nothing uses any more goes
        source = (LESSONS / folder / "experiment.py").read_text()
        assert what in {w for _, w in private_uses(source)}, (folder, what)


def test_the_shim_modules_tested_are_the_ones_allowed():
    assert {Path(m.__file__).resolve() for m in SHIMS} == {p.resolve() for p in ALLOWED}


@pytest.mark.parametrize("module", SHIMS, ids=lambda m: m.__name__)
def test_every_shim_has_an_entry_saying_what_it_wraps_why_and_which_torch_it_was_read_in(module):
    assert module.CHECKED_ON and module.CHECKED and all(
        isinstance(a, torch_compat.PrivateApi) and a.name and a.torch_name and a.why
        and re.match(r"\d+\.\d+", a.read_in) for a in module.CHECKED)
    # an entry names its shims ("a / b / c"); "sim/dispatch: ..." names what sim overrides
    named = {n.strip() for a in module.CHECKED for n in a.name.split(":")[-1].split("/")}
    for name in module.__all__:
        assert hasattr(module, name), name
    shims = set(module.__all__) - NOT_SHIMS
    assert not shims - named, f"shims no entry of CHECKED names: {sorted(shims - named)}"


def test_a_shim_lives_in_one_shim_module():
    compat, compile_ = (set(m.__all__) - NOT_SHIMS for m in SHIMS)
    assert not compat & compile_, sorted(compat & compile_)
