"""Balanced routing: the value policy for a mixture of experts looped over by hand.

A loop-routed MoE layer (Mixtral's first transformers implementation, many hand-written ones)
picks each expert's tokens by value: `mask = one_hot(top_k_indices, E)`, then per expert
`torch.where(mask[e])` (or `nonzero`), whose output's size is how many tokens the router sent
there. Sim has no values, so it assumes what a balanced router does:

    THE POLICY. A mask made by `one_hot(indices, num_classes=E)` has exactly one 1 per row: its
    density is 1/E. Views and selections of it keep that density (`permute`, `transpose`,
    `view`, `reshape`, `mask[e]`, `select`, `unbind`, `bool`, `to`, `contiguous`, `flatten`).
    `torch.where(mask)`, `nonzero` and `argwhere` of such a mask answer `numel x density`
    elements: every expert gets tokens x top_k / E of them.

The sites that took the policy are named in the result, and the zoo's `moe/loop-*` GPU cases
measure real random-weight routing against it. A mask of any other provenance is still refused
in one line (lab.measure.sim.facade.placement). transformers' grouped-mm experts path needs no
policy: its tensors are sized by tokens x top_k.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F

_T = torch.Tensor
_FAKE_DEVICE = torch.device("cpu")  # a GPU tensor's device in sim (under the fake mode)
_ONE_HOT = {F.one_hot, torch.nn.functional.one_hot}
_KEEP = {_T.permute, _T.transpose, _T.__getitem__, _T.view, _T.reshape, _T.select, _T.bool,
         _T.to, _T.contiguous, _T.flatten, _T.unbind, _T.t, torch.permute, torch.transpose,
         torch.reshape, torch.select, torch.flatten, torch.unbind, torch.t}
_COUNTED = {torch.where, torch.nonzero, _T.nonzero, torch.argwhere, _T.argwhere}
WATCHED = _ONE_HOT | _KEEP  # the calls `after` looks at (placement checks membership first)


class RoutingDensity:
    """Densities of one_hot masks and their views, by identity; the sites that used them."""

    def __init__(self):
        self._density: dict[int, tuple] = {}  # id(tensor) -> (weakref, density)
        self.sites: dict[str, int] = {}

    def _get(self, t) -> float | None:
        hit = self._density.get(id(t))
        return hit[1] if hit is not None and hit[0]() is t else None

    def _set(self, t, density: float) -> None:
        if isinstance(t, torch.Tensor):
            key = id(t)
            self._density[key] = (weakref.ref(t, lambda _, k=key: self._density.pop(k, None)),
                                  density)

    def after(self, func, args, kwargs, out) -> None:
        """Called after a device op in WATCHED."""
        if func in _ONE_HOT:
            classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
            if isinstance(classes, int) and classes > 0:
                self._set(out, 1.0 / classes)
            return
        if not self._density or not args:
            return
        d = self._get(args[0])
        if d is None:
            return
        for o in out if isinstance(out, (tuple, list)) else (out,):
            self._set(o, d)

    def answer(self, func, args, kwargs, site) -> object | None:
        """The balanced answer of a data-dependent op on a one_hot mask, else None."""
        if func not in _COUNTED or not args or len(args) > 1 and func is torch.where:
            return None
        mask = args[0]
        d = self._get(mask) if isinstance(mask, torch.Tensor) else None
        if d is None:
            return None
        count = round(mask.numel() * d)
        where = site()
        self.sites[where] = self.sites.get(where, 0) + 1
        if func is torch.where or kwargs.get("as_tuple"):
            return tuple(torch.empty((count,), dtype=torch.int64, device=_FAKE_DEVICE)
                         for _ in range(mask.dim()))
        return torch.empty((count, mask.dim()), dtype=torch.int64, device=_FAKE_DEVICE)

    def note(self) -> str | None:
        if not self.sites:
            return None
        sites = ", ".join(f"{s} x{n}" if n > 1 else s for s, n in self.sites.items())
        return ("balanced routing assumed (sim has no router values): each expert's tokens "
                "picked from a one_hot mask by torch.where / nonzero were sized as tokens x "
                f"top_k / experts, at {sites}")


__all__ = ["RoutingDensity", "WATCHED"]
