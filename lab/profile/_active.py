"""Which AutoPhases (if any) is listening now: `memlab.phase()` asks here. Torch-free, so a
script that imports memlab for its phase markers runs unprofiled without paying for torch."""

from __future__ import annotations

_STACK: list = []


def push(auto) -> None:
    _STACK.append(auto)


def remove(auto) -> None:
    if auto in _STACK:
        _STACK.remove(auto)


def current():
    return _STACK[-1] if _STACK else None
