"""The technique's own code, for the Experiment tab: what `run_with(run, "bf16")` really runs.

Many lessons' variants hand a `TrainConfig` to the lab's one training loop (lab/workloads), so
the lesson's experiment.py shows `run_with(run, "bf16")` and not the `torch.autocast` block or
the `GradScaler` the lesson teaches. This module finds, without running anything, which
`TrainConfig` fields a variant sets (following its call to a helper such as `run_with`, with
`ast`), and returns the workload functions that implement those fields, their source read from
the installed files: the autocast block and the scaler for a precision, the checkpoint call for
checkpointing, the micro-batch loop, zero_grad, the optimizer, DDP / ZeRO / FSDP.

Headless and torch-free (the source is read as text).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from lab import python_source

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"

# TrainConfig field -> (does this value switch the technique on, file, functions, words to mark)
TECHNIQUES: tuple[tuple[str, Any, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("precision", {"bf16", "fp16"}, "train.py", ("autocast", "train_step"),
     ("autocast", "scaler")),
    ("precision", {"fp16"}, "train.py", ("make_scaler",), ("GradScaler",)),
    ("precision", {"pure-bf16"}, "train.py", ("param_dtype",), ("bfloat16",)),
    ("checkpointing", {"blocks", "hf"}, "train.py", ("enable_checkpointing",),
     ("checkpoint",)),
    ("micro_batches", lambda v: isinstance(v, int) and v > 1, "train.py", ("train_step",),
     ("chunk", "/ n")),
    ("set_to_none", {True, False}, "train.py", ("train_step",), ("zero_grad",)),
    ("optimizer", lambda v: True, "train.py", ("make_optimizer",), ("build",)),
    ("optimizer", lambda v: True, "optim.py", ("optimizer_spec",), ("impl", "foreach", "fused")),
    ("parallel", {"ddp", "zero1", "fsdp"}, "parallel.py", ("wrap",),
     ("DistributedDataParallel", "ZeroRedundancyOptimizer", "fully_shard")),
    ("offload", {"cpu"}, "parallel.py", ("wrap",), ("CPUOffloadPolicy", "offload_policy")),
)


@dataclass(frozen=True)
class Snippet:
    path: str  # "lab/workloads/train.py"
    name: str  # the function
    source: str
    start: int  # its first line in the file (1-based)
    marked: tuple[int, ...]  # lines (in the file) that do the technique


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _literal(node: ast.AST, bound: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in bound:
        return bound[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return ...  # not a constant (run.p.micro_batches): on, value unknown


def _config_calls(fn: ast.FunctionDef, bound: dict[str, Any], funcs: dict[str, ast.FunctionDef],
                  depth: int = 0) -> dict[str, Any]:
    """The TrainConfig fields set by `fn` called with `bound` arguments (one helper deep)."""
    fields: dict[str, Any] = {}
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name == "TrainConfig":
            for kw in call.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Name):  # **config
                    fields.update(bound.get(f"**{kw.value.id}", {}))
                elif kw.arg is not None:
                    fields[kw.arg] = _literal(kw.value, bound)
        elif name in funcs and depth < 2:
            fields.update(_config_calls(funcs[name], _bind(funcs[name], call, bound), funcs,
                                        depth + 1))
    return fields


def _bind(fn: ast.FunctionDef, call: ast.Call, outer: dict[str, Any]) -> dict[str, Any]:
    args = fn.args
    names = [a.arg for a in args.posonlyargs + args.args]
    defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
    bound = {n: _literal(d, {}) for n, d in defaults.items()}
    for name, value in zip(names, call.args):
        bound[name] = _literal(value, outer)
    extra = {}
    for kw in call.keywords:
        if kw.arg in names:
            bound[kw.arg] = _literal(kw.value, outer)
        elif kw.arg is not None:
            extra[kw.arg] = _literal(kw.value, outer)
    if args.kwarg is not None:
        bound[f"**{args.kwarg.arg}"] = extra
    return bound


def config_of(code: str, variant: str) -> dict[str, Any]:
    """The TrainConfig fields `def variant(run)` sets; {} when it sets none (or is not found)."""
    try:
        tree = python_source.parse(code)
    except SyntaxError:
        return {}
    funcs = _functions(tree)
    fn = funcs.get(variant)
    return _config_calls(fn, {}, funcs) if fn is not None else {}


@lru_cache(maxsize=8)
def _source(file: str) -> tuple[str, dict[str, tuple[int, int]]]:
    text = (WORKLOADS / file).read_text(encoding="utf-8")
    spans = {n.name: (n.lineno, n.end_lineno or n.lineno)
             for n in python_source.parse(text).body if isinstance(n, ast.FunctionDef)}
    return text, spans


def technique_snippets(code: str, variant: str) -> list[Snippet]:
    """The workload functions that do what `variant` switches on, each once, in file order."""
    fields = config_of(code, variant)
    wanted: dict[tuple[str, str], set[str]] = {}
    for field_name, on, file, names, words in TECHNIQUES:
        if field_name not in fields:
            continue
        value = fields[field_name]
        active = value is ... or (on(value) if callable(on) else value in on)
        if active:
            for name in names:
                wanted.setdefault((file, name), set()).update(words)
    out = []
    for (file, name), words in wanted.items():
        try:
            text, spans = _source(file)
        except OSError:
            continue
        if name not in spans:
            continue
        start, end = spans[name]
        lines = text.splitlines()[start - 1:end]
        marked = tuple(start + i for i, line in enumerate(lines) if any(w in line for w in words))
        out.append(Snippet(f"lab/workloads/{file}", name, "\n".join(lines), start, marked))
    return sorted(out, key=lambda s: (s.path, s.start))  # as the files read


__all__ = ["Snippet", "TECHNIQUES", "config_of", "technique_snippets"]
