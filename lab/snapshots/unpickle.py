"""A pickle loader that builds plain data only, and refuses everything else before it runs.

A PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot`) is a pickle of dicts, lists,
strings and numbers. A pickle can also name any importable callable (`os.system`,
`builtins.open`, ...) and call it while loading: that is how pickles run code. Every such name
goes through `Unpickler.find_class` (GLOBAL, STACK_GLOBAL, INST, OBJ and the EXT opcodes all
resolve through it) *before* anything can call it, so refusing there refuses the whole file
before a single foreign callable exists. Persistent ids are refused the same way.

What can come out: dict, list, tuple, set, frozenset, str, bytes, int, float, bool
and None. The C unpickler does the work, so a 1,000,000-entry snapshot loads at C speed; the
cyclic garbage collector is paused while it builds (it would otherwise rescan the growing heap
again and again for a structure that has no cycles).
"""

from __future__ import annotations

import gc
import io
import pickle
from contextlib import contextmanager
from typing import IO, Any

# The only globals a plain-data pickle may need: protocol 0-2 pickles build a set by calling
# `builtins.set(list)` (spelled `__builtin__` by protocols < 3; protocol 4 has its own opcodes
# for sets). Nothing else is allowed: not even `_codecs.encode`, which old protocols use for bytes.
_ALLOWED = {(m, n): t for m in ("builtins", "__builtin__")
            for n, t in (("set", set), ("frozenset", frozenset))}


class RefusedPickle(pickle.UnpicklingError):
    """The pickle asked for something other than plain data; nothing in it was run."""


class PlainDataOnly:
    """An Unpickler's two doors to code, shut: the C unpickler below and the streaming one
    (lab.snapshots.stream) both take it."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise RefusedPickle(f"it asks for `{module}.{name}`")
        return allowed

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickle("it uses a persistent id (an object stored outside the pickle)")


class _PlainDataUnpickler(PlainDataOnly, pickle.Unpickler):
    pass


@contextmanager
def gc_paused():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_plain(source: bytes | IO[bytes]) -> Any:
    """Unpickle plain data from bytes or a binary file. Raises `RefusedPickle` for anything else,
    `pickle.UnpicklingError` (or EOFError/ValueError, ...) for a damaged file."""
    f = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
    with gc_paused():
        return _PlainDataUnpickler(f).load()


__all__ = ["RefusedPickle", "gc_paused", "load_plain"]
