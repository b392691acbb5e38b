"""What a block live at the peak most likely *is*, from its whole life in the trace.

A raw `_dump_snapshot` knows where each block was allocated (its stack) and, in its trace, when
and where it was freed; it never says what a block is. The phase its stack points at
(`frames.guess_phase`) is a first guess: a forward block is an activation, a backward block a
gradient, an optimizer block its state. Three kinds of block break that guess, and the trace
tells them apart (the tensor tracker uses the same rule for its own runs: a storage freed in the
phase it was born in is a temporary):

  born in forward    freed in the same forward (no optimizer step in between): temporaries.
                     Never freed, and a whole step began after it (an optimizer step, then a
                     forward): not an activation of a step, `other` (cuBLAS's workspace, made
                     by the first matmul, lives to the end; so does a cache). A block freed
                     later, in any phase, stays an activation.
  born in backward   freed by the autograd engine (no Python stack at the free): an activation's
                     gradient, `temporaries`. Otherwise a parameter's gradient when its size is
                     a parameter's (or no parameter size is known); else `other` (the autograd
                     thread's own cuBLAS workspace).
  born in the step   freed inside the optimizer step: `temporaries` (foreach intermediates);
                     otherwise `optimizer_state`.

Only guessed categories are refined; entries that carry their own (snapshots memlab wrote from
a cpu/sim run) are left as they are. Cheap: the frees after the peak are found in C
(`dict(compress(...))`), and only the blocks live at the peak are looked at.
"""

from __future__ import annotations

from itertools import compress
from operator import itemgetter

from . import frames as fr

from lab.measure.snapshot_format import FREE
SETUP_PHASES = ("model setup", "unknown")  # parameters: built first, or before recording


def first_frees_after(entries: list, acts: list, pi: int) -> dict:
    """address -> index of the first `free_completed` after entry `pi` (C speed)."""
    tail = entries[:pi:-1]  # reversed: the dict keeps the last write, i.e. the earliest free
    try:
        addrs = list(map(itemgetter("addr"), tail))
    except KeyError:
        addrs = [e.get("addr") for e in tail]
    idx = range(len(entries) - 1, pi, -1)
    return dict(compress(zip(addrs, idx), map(FREE.__eq__, acts[:pi:-1])))


class Lifetimes:
    """Refines the guessed category of blocks live at the peak (see the module docstring)."""

    def __init__(self, entries: list, acts: list, pi: int, t_arr, bands, has_stacks: bool):
        self.entries, self.t, self.has_stacks = entries, t_arr, has_stacks
        self.frees = first_frees_after(entries, acts, pi) if entries else {}
        # (start of an optimizer step, start of the next forward after it): one step boundary
        self.steps: list[tuple[int, int]] = []
        for k, b in enumerate(bands):
            if b.name == "optimizer step":
                nxt = next((c.start_us for c in bands[k + 1:] if c.name == "forward"), None)
                if nxt is not None:
                    self.steps.append((b.start_us, nxt))
        self.end_t = t_arr[-1] if len(t_arr) else 0
        self.param_sizes: set[int] = set()

    def learn_parameters(self, items: list, phases: list[str]) -> None:
        """Sizes of blocks that look like parameters (built in model setup, or live since
        before recording): a backward block of one of these sizes is a gradient."""
        self.param_sizes = {it[0] for it, ph in zip(items, phases) if ph in SETUP_PHASES}

    def _death(self, addr) -> tuple[int | None, str]:
        j = self.frees.get(addr)
        if j is None:
            return None, ""
        frames = self.entries[j].get("frames") or []
        return j, fr.guess_phase(frames, self.has_stacks)

    def _crosses_step(self, t_birth: int, t_death: int) -> bool:
        return any(t_birth < s and f <= t_death for s, f in self.steps)

    def refine(self, alloc_index: int | None, nbytes: int, phase: str, category: str) -> str:
        """The category for a live block born at `alloc_index` in `phase` (guessed)."""
        if alloc_index is None or not self.entries:
            return category
        e = self.entries[alloc_index]
        j, death_phase = self._death(e.get("addr"))
        t_birth = self.t[alloc_index]
        t_death = self.t[j] if j is not None else self.end_t
        if phase == "forward":
            if j is None and self._crosses_step(t_birth, t_death):
                return "other"
            if j is not None and death_phase == "forward" and not self._crosses_step(t_birth, t_death):
                return "temporaries"
            return "activations"
        if phase == "backward":
            if j is not None and death_phase == "backward" and not self._crosses_step(t_birth, t_death):
                return "temporaries"
            if not self.param_sizes or nbytes in self.param_sizes:
                return "gradients"
            return "other"
        if phase == "optimizer step":
            if j is not None and death_phase == "optimizer step" \
                    and not self._crosses_step(t_birth, t_death):
                return "temporaries"
            return "optimizer_state"
        return category


__all__ = ["Lifetimes", "first_frees_after"]
