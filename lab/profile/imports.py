"""Which libraries a profiled script imports: read from its source, never by running it.

    script_imports(cmd)            -> frozenset({"torch", "transformers", "peft"})
    imported(result, "transformers")  -> True / False for a profile's result, None otherwise

A note about a library's version belongs beside a script's numbers only when the script uses
that library (issue 37). The worker cannot tell by watching `sys.modules`: it imports torch and
transformers before any request, to start warm. So this reads the script's own files: every
`import x` / `from x import y` / `importlib.import_module("x")` with a literal name, following
the modules of the script's own folder (`from model import GPT`, relative imports) and counting
what they import too. A library imported only by another library (transformers under peft) is
the other library's business; one imported under a computed name is not seen. Torch-free.

The result carries the answer (`params["imports"]`, lab.profile.run.finish), so the command that
prints a version note (lab.measure.versions) can ask `imported(result, name)`.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from lab import python_source

MAX_FILES = 200  # a script's own folder, not a whole project tree


def script_imports(cmd) -> frozenset[str]:
    """The top-level names `cmd` (a lab.profile.run.ScriptCommand) and its own modules import;
    empty when the entry file cannot be found or read."""
    entry, root = _entry(cmd)
    if entry is None:
        return frozenset()
    found: set[str] = set()
    seen: set[Path] = set()
    todo = [entry]
    while todo and len(seen) < MAX_FILES:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name, level in _imports_of(path):
            local = _local(name, level, path, root)
            if local is not None:
                todo.append(local)
            elif level == 0 and name:
                found.add(name.split(".")[0])
    return frozenset(found)


def imported(result, name: str) -> bool | None:
    """Whether a profiled script imported `name` (a top-level package); None when `result` is
    not a profile of a script (a lesson uses what its experiment uses)."""
    names = (getattr(result, "params", None) or {}).get("imports")
    if getattr(result, "lesson", None) != "profile" or names is None:
        return None
    return name in names


def _entry(cmd) -> tuple[Path | None, Path]:
    if not cmd.module:
        p = Path(cmd.target).expanduser().resolve()
        return (p if p.is_file() else None), p.parent
    root = Path(os.getcwd())
    base = root.joinpath(*cmd.target.split("."))
    for p in (base.with_suffix(".py"), base / "__main__.py"):
        if p.is_file():
            return p, root
    return None, root


def _imports_of(path: Path) -> list[tuple[str, int]]:
    """(module name, relative level) of every import in the file."""
    try:
        tree = python_source.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", node.level))
            if node.level and not node.module:  # from . import model
                out += [(a.name, node.level) for a in node.names]
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            out.append((node.args[0].value, 0))
    return out


def _is_import_module(func) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))


def _local(name: str, level: int, path: Path, root: Path) -> Path | None:
    """The file of a module of the script's own (its folder, or relative to its package)."""
    base = path.parent
    for _ in range(max(level - 1, 0)):
        base = base.parent
    folders = [base] if level else list(dict.fromkeys([path.parent, root]))
    for folder in folders:
        stem = folder.joinpath(*name.split(".")) if name else folder
        for p in (stem.with_suffix(".py"), stem / "__init__.py"):
            if name and p.is_file():
                return p
    return None


__all__ = ["imported", "script_imports"]
