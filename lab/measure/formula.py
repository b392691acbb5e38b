"""Safe arithmetic for lesson expectations: "(d_in * d_out + d_out) * 4".

Lessons are data, so their formulas must not be able to run code. Python's `ast` parses the
expression and we evaluate only numbers, parameter names, + - * / // ** % and min/max — a few
lines, which is why no expression library is pulled in for it.
"""

from __future__ import annotations

import ast
import operator
from typing import Any
from lab import python_source

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_FUNCS = {"min": min, "max": max, "ceil": lambda x: -(-x // 1)}


class FormulaError(ValueError):
    pass


def names_in(expr: str) -> set[str]:
    tree = python_source.parse(str(expr), mode="eval")
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def evaluate(expr: str | int | float, params: dict[str, Any]) -> float:
    if isinstance(expr, (int, float)):
        return expr
    try:
        tree = python_source.parse(expr, mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"{expr!r} is not an arithmetic expression ({e.msg})") from None
    return _eval(tree.body, params, expr)


def _eval(node: ast.AST, params: dict[str, Any], expr: str):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise FormulaError(f"{expr!r} uses {node.id!r}, which is not a parameter "
                               f"(known: {', '.join(sorted(params)) or 'none'})")
        return params[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, params, expr), _eval(node.right, params, expr))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, params, expr)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS and not node.keywords):
        return _FUNCS[node.func.id](*(_eval(a, params, expr) for a in node.args))
    raise FormulaError(f"{expr!r}: only numbers, parameter names, + - * / // ** %, min, max, ceil")
