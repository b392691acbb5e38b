"""The engine room's layout, by counts (issue 35). Prints, never asserts.

    python bench/layout_counts.py [CHECKOUT] [--edges]

CHECKOUT (default: this one) is any checkout of the lab: the counts are read from its source
files alone (nothing is imported from it), so an older commit can be measured the same way:
`git worktree add /tmp/old <commit>; python bench/layout_counts.py /tmp/old`.

- torch_compat.py lines (and torch_compat_compile.py's, where the checkout has it): the shim
  modules, the only ones allowed to name private torch APIs;
- import cycles in lab/measure: groups of modules that import one another (strongly connected
  components of the module graph). Every import statement counts, inside functions and under
  `if TYPE_CHECKING:` too, as import-linter (pyproject's contracts) counts them;
- arrows back up: imports from a module to one in a higher layer of lab/measure's layer order
  (`LAYERS` below, the order pyproject's `measure-layers` and `sim-layers` contracts keep; old
  module names are placed where their code now lives, so an old checkout is measured against
  the same order);
- engine -> sim imports: modules of lab/measure outside lab/measure/sim and the sim backend
  (lab/measure/backends/sim.py, which assembles sim) importing something of lab/measure/sim;
- sim -> engine private names: `_name`s sim's modules import from the rest of lab/measure;
- private torch references outside the shim modules, in lab/ and in lessons/: what
  tests/unit/test_torch_compat.py's scanner finds (the checkout's own copy of it, read as text,
  and its SHIM_MODULES: torch_compat alone where it has none).

`--edges` also prints each import behind the counts.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import subprocess
import sys
from pathlib import Path
from lab import python_source

HERE = Path(__file__).resolve().parent.parent

# lab/measure's layers, top (imports what is below) to bottom; a module takes the first layer one
# of whose patterns matches its dotted name below `lab.measure.` (sim's own layers after these)
LAYERS: list[tuple[str, list[str]]] = [
    ("drivers", ["measure", "sim_record", "sim.record"]),
    ("session", ["session"]),
    ("backends", ["backends", "backends.*", "sim.backend"]),
    ("sim", ["sim", "sim.*"]),
    ("engine", ["tracker", "tracker_*", "result_parts", "allocator_view", "snapshot", "timing", "cuda_allocator",
                "cuda", "device", "distributed", "ddp"]),
    ("base", ["trace", "result", "result_schema", "schema", "modes", "counters",
              "snapshot_format", "formula", "versions", "torch_compat", "torch_compat_compile",
              "spec"]),
]
SIM_LAYERS: list[tuple[str, list[str]]] = [
    ("sim: what runs", ["facade", "facade.*", "dispatch", "dispatch.*", "ranks", "versions",
                        "cuda_facade", "facade_*", "cuda_memory_api", "script_values", "policy",
                        "fake_values", "compiled", "compiled.*"]),
    ("sim: DTensor's shortcuts", ["dtensor"]),
    ("sim: CUDA's paths", ["kernels", "kernels.*", "cuda_*", "grad_accumulate",
                           "fsdp_offload"]),
    ("sim: the allocator", ["allocator", "allocator.*", "allocator_*"]),
    ("sim: data and tools", ["patches", "gpus", "ports"]),
]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path, package: str = "lab.measure") -> dict[str, dict[str, list[str]]]:
    """module -> {module of `package` it imports -> the names it takes from it}."""
    base = root.joinpath(*package.split("."))
    mods = {module_name(root, p): p for p in base.rglob("*.py")}
    graph: dict[str, dict[str, list[str]]] = {}
    for mod, path in mods.items():
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out: dict[str, list[str]] = {}
        for node in ast.walk(python_source.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                    target = ".".join(parts + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in mods:  # `from . import module`
                        out.setdefault(sub, [])
                    elif target in mods:
                        out.setdefault(target, []).append(alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in mods:
                        out.setdefault(alias.name, [])
        out.pop(mod, None)
        graph[mod] = out
    return graph


def cycles(graph: dict[str, dict]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer_of(mod: str, layers: list[tuple[str, list[str]]], prefix: str) -> int | None:
    if not mod.startswith(prefix):
        return None
    rest = mod[len(prefix):]
    for i, (_, patterns) in enumerate(layers):
        if any(fnmatch.fnmatchcase(rest, p) for p in patterns):
            return i
    return None


def arrows_back_up(graph) -> tuple[list[tuple[str, str]], list[str]]:
    """(imports from a lower layer to a higher one, modules no layer places). Two modules of
    sim are compared by SIM_LAYERS, any other two by LAYERS."""
    sim = [name for name, _ in LAYERS].index("sim")

    def place(mod: str) -> tuple[int | None, int | None]:
        return (layer_of(mod, LAYERS, "lab.measure."), layer_of(mod, SIM_LAYERS, "lab.measure.sim."))

    up, unplaced = [], set()
    for mod, targets in graph.items():
        a = place(mod)
        if (a[0] is None and mod != "lab.measure") or (a[0] == sim and a[1] is None
                                                       and mod != "lab.measure.sim"):
            unplaced.add(mod)
        for t in targets:
            b = place(t)
            both_sim = a[0] == b[0] == sim and a[1] is not None and b[1] is not None
            i, j = (a[1], b[1]) if both_sim else (a[0], b[0])
            if i is not None and j is not None and j < i:
                up.append((mod, t))
    return sorted(set(up)), sorted(unplaced)


def engine_to_sim(graph) -> list[tuple[str, str]]:
    def engine(m: str) -> bool:
        return not (m.startswith("lab.measure.sim") or m == "lab.measure.backends.sim")

    return sorted((m, t) for m, ts in graph.items() if engine(m)
                  for t in ts if t.startswith("lab.measure.sim"))


def sim_private_names(graph) -> list[tuple[str, str, str]]:
    return sorted((m, t, n) for m, ts in graph.items() if m.startswith("lab.measure.sim")
                  for t, names in ts.items() if not t.startswith("lab.measure.sim")
                  for n in names if n.startswith("_") and not n.startswith("__"))


def private_torch(root: Path) -> dict[str, list[tuple[int, str]]]:
    """The checkout's own scanner (tests/unit/test_torch_compat.py's `private_uses` and
    PRIVATE_ATTRS), run on every module of lab/ but the shim modules and every file of lessons/."""
    test = (root / "tests" / "unit" / "test_torch_compat.py").read_text()
    tree = python_source.parse(test)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name in ("_private", "_chain", "private_uses")]
    keep += [n for n in tree.body if isinstance(n, ast.Assign)
             and any(getattr(t, "id", "") == "PRIVATE_ATTRS" for t in n.targets)]
    ns: dict = {}
    exec("from __future__ import annotations\nimport ast\nfrom lab import python_source\n"
         + "\n\n".join(ast.unparse(n) for n in keep), ns)
    found = {}
    shims = {root / "lab" / "measure" / f"{name}.py" for name in shim_modules(root)}
    for path in sorted([*(root / "lab").rglob("*.py"), *(root / "lessons").rglob("*.py")]):
        if path in shims:
            continue
        uses = ns["private_uses"](path.read_text())
        if uses:
            found[str(path.relative_to(root))] = uses
    return found


def shim_modules(root: Path) -> tuple[str, ...]:
    """The modules of lab/measure allowed to name private torch APIs: the checkout's
    SHIM_MODULES, or torch_compat alone (before issue 41's torch_compat_compile)."""
    tree = python_source.parse((root / "tests" / "unit" / "test_torch_compat.py").read_text())
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "SHIM_MODULES"
                                             for t in n.targets):
            return tuple(ast.literal_eval(n.value))
    return ("torch_compat",)


def taught(root: Path) -> set[tuple[str, str]]:
    """(lesson folder, use) a lesson shows by its torch name: the checkout's TAUGHT, if any."""
    tree = python_source.parse((root / "tests" / "unit" / "test_torch_compat.py").read_text())
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "TAUGHT" for t in n.targets):
            return set(ast.literal_eval(n.value))
    return set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", nargs="?", default=str(HERE))
    ap.add_argument("--edges", action="store_true", help="print each import behind the counts")
    args = ap.parse_args()
    root = Path(args.checkout).resolve()
    graph = import_graph(root)
    compat = root / "lab" / "measure" / "torch_compat.py"
    groups = cycles(graph)
    up, unplaced = arrows_back_up(graph)
    e2s = engine_to_sim(graph)
    priv = sim_private_names(graph)
    torch_priv = private_torch(root)
    in_lab = sum(len(v) for k, v in torch_priv.items() if k.startswith("lab"))
    in_lessons = sum(len(v) for k, v in torch_priv.items() if k.startswith("lessons"))
    named = taught(root)
    as_taught = sum(1 for k, v in torch_priv.items() if k.startswith("lessons")
                    for _, what in v if (Path(k).parts[1], what) in named)
    head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h %cs"],
                          capture_output=True, text=True).stdout.strip()
    print(f"# lab/measure's layout: {root} ({head or 'not a git checkout'})")
    print(f"torch_compat.py lines                      {len(compat.read_text().splitlines()):5}")
    for name in shim_modules(root):
        if name != "torch_compat":
            lines = len((compat.parent / f"{name}.py").read_text().splitlines())
            print(f"{name + '.py lines':42} {lines:5}")
    print(f"modules in lab/measure                     {len(graph):5}")
    print(f"import cycles in lab/measure               {len(groups):5}"
          + "".join(f"\n    {' <-> '.join(g)}" for g in groups))
    print(f"arrows back up (against LAYERS)            {len(up):5}")
    print(f"engine -> sim imports                      {len(e2s):5}")
    print(f"sim -> engine private names                {len(priv):5}")
    print(f"private torch outside the shims, lab/      {in_lab:5}")
    print(f"private torch outside the shims, lessons/  {in_lessons:5}"
          + (f"  ({as_taught} taught by name: test_torch_compat.TAUGHT)" if as_taught else ""))
    if unplaced:
        print(f"modules LAYERS does not place: {', '.join(unplaced)}")
    if args.edges:
        for title, rows in (("arrows back up", up), ("engine -> sim", e2s),
                            ("sim -> engine private names", priv)):
            print(f"\n{title}:")
            for row in rows:
                print("   ", " -> ".join(row))
        print("\nprivate torch outside the shim modules:")
        for path, uses in torch_priv.items():
            print(f"    {path}: {', '.join(what for _, what in uses)}")


if __name__ == "__main__":
    main()
