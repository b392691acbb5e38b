"""`ast.parse`, safe to call from several threads at once.

CPython 3.11 keeps the AST builder's recursion counter in per-interpreter state, so two threads
parsing at the same moment can corrupt each other's count and one of them gets
`SystemError: AST constructor recursion depth mismatch` (python/cpython#106905; the app parses
lesson code in thread workers, the suite saw it in CI). Our own parses take one lock; a parse
that still collides with a library's (which we cannot lock) is retried, since the source was
never the problem. Stdlib only.
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()
_ATTEMPTS = 3


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)`; a SyntaxError still raises as usual."""
    for _ in range(_ATTEMPTS - 1):
        try:
            with _ONE_AT_A_TIME:
                return ast.parse(source, filename, mode)
        except SystemError as err:
            if "recursion depth mismatch" not in str(err):
                raise
    with _ONE_AT_A_TIME:  # the last attempt: whatever it raises is the answer
        return ast.parse(source, filename, mode)
