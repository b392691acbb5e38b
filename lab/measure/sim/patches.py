"""Replacing attributes of torch for the length of a run, from a table, and putting every one back.

Sim changes a few of torch's functions while an experiment or a script runs (code that calls
`torch.cuda.empty_cache()` must reach the allocator model, not CUDA). Each change is a row —
(where, attribute, replacement) — so what is intercepted can be listed, checked in, and tested:
`Patches.__exit__` restores every attribute it replaced, and a test compares the namespaces
before and after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Patch:
    owner: Any  # a module or class
    name: str  # the attribute replaced
    make: Callable[[Any], Any]  # original -> replacement
    why: str  # one line, for the checked-in list
    # added where this torch lacks it (a CUDA-only binding of torch._C that a CPU build does not
    # have), and removed again after; `make` then receives None
    add: bool = False

    @property
    def where(self) -> str:
        mod = getattr(self.owner, "__name__", type(self.owner).__name__)
        return f"{mod}.{self.name}"


class Swaps:
    """Attributes replaced one at a time (some only once their module is imported) and put back,
    in reverse order, by `restore()`. `Patches` installs its table through one; sim's offload
    and fake-value hooks, which patch transformers when it appears, use one directly."""

    def __init__(self):
        self._saved: list[tuple[Any, str, Any]] = []

    def __bool__(self) -> bool:
        return bool(self._saved)

    def replace(self, owner: Any, name: str, value: Any, add: bool = False) -> bool:
        """`owner.name = value`, the original kept; False (nothing done) when there is no such
        attribute on this version, unless `add` (then `restore()` deletes it again)."""
        if not hasattr(owner, name) and not add:
            return False
        self._saved.append((owner, name, getattr(owner, name, _ABSENT)))
        setattr(owner, name, value)
        return True

    def restore(self) -> None:
        for owner, name, original in reversed(self._saved):
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._saved.clear()


_ABSENT = object()  # what `Swaps` saves for an attribute it added


class Patches:
    """A context manager installing `patches` (rows whose attribute does not exist on this torch
    are skipped, and said in `skipped`) and restoring them in reverse order."""

    def __init__(self, patches: list[Patch]):
        self.patches = list(patches)
        self._swaps = Swaps()
        self.skipped: list[str] = []

    def __enter__(self) -> Patches:
        if self._swaps:
            raise RuntimeError("Patches entered twice")
        for p in self.patches:
            if not hasattr(p.owner, p.name) and not p.add:
                self.skipped.append(p.where)
                continue
            self._swaps.replace(p.owner, p.name, p.make(getattr(p.owner, p.name, None)), p.add)
        return self

    def __exit__(self, *exc) -> None:
        self._swaps.restore()


__all__ = ["Patch", "Patches", "Swaps"]
