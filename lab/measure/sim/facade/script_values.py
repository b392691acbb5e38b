"""What a user's script did in sim that the result must say: values read, device branches,
calls sim answered its own way, and the first thing it could not run.

Sim's tensors are fake: shapes and bytes, no values. A script still reads values (`loss.item()`,
`f"{loss:.4f}"`, `if torch.isnan(loss):`), so those get stand-ins - 1, 1.0 or True, as
lab.measure.sim.dispatch.fake_values answers inside `run.stand_in_values` - and the result names
every line that read one, since code that decides on a value (an early stop, a skipped step) may
have taken another branch than on the GPU. What cannot get a stand-in is refused in one line:

    not supported in sim: torch.nonzero at train.py:12 (its output's shape depends on values)

`ScriptLog` collects all of it while the script runs (lab.measure.sim.facade.cuda_facade writes to
it; lab/profile/script.py turns it into notes); torch-free except for the stand-ins.
"""

from __future__ import annotations

import linecache
import os
import sys
from collections import Counter

# the lab package (lab/): its frames are never the script's site (lab/profile wraps modules'
# __call__ for the evaluation cap: a site inside it would name memlab, not the script)
_LAB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))) + os.sep
_STDLIB_DIR = os.path.dirname(os.__file__)
MAX_SITES = 8  # sites listed per note; the rest are counted


class NotSupportedInSim(RuntimeError):
    """One line: what the script asked for, where, and why sim cannot do it."""


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    if "site-packages" in parts:  # transformers/models/gpt2/modeling_gpt2.py, not the venv path
        return "/".join(parts[parts.index("site-packages") + 1:])
    return parts[-1]


class ScriptLog:
    """Sites (file:line) of what sim answered its own way while a script ran."""

    def __init__(self, script_dir: str | None = None):
        import torch

        self.script_dir = os.path.abspath(script_dir) + os.sep if script_dir else None
        self._skip = (os.path.dirname(torch.__file__), _LAB_DIR, _STDLIB_DIR)
        self.value_reads: dict[str, Counter] = {}  # site -> how it read ({".item()": 3})
        self.host_copies: dict[str, int] = {}  # site -> count (.cpu(), .numpy(), .to("cpu"))
        self.device_reads: dict[str, str] = {}  # script site -> what it read
        self.notes: dict[str, str] = {}  # key -> one line, in order of first occurrence
        self.refused: NotSupportedInSim | None = None

    # ---- where ---------------------------------------------------------------------------------
    def site(self, depth: int = 1) -> str:
        """'train.py:12' (the script's files by name, libraries by their package path): the
        nearest frame outside torch, this lab and the standard library."""
        f = sys._getframe(depth)
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith(self._skip) and not fn.startswith("<"):
                return f"{_short(fn)}:{f.f_lineno}"
            f = f.f_back
        return "?"

    def sees_gpu(self, filename: str) -> bool:
        """Code that reads a GPU tensor's device as the GPU's (`cuda:0`): the script's and its
        libraries', not torch's own, memlab's or the standard library's (which run on the CPU
        device the fake tensor has, and must: their kernels are the CPU's)."""
        return not filename.startswith(self._skip) and not filename.startswith("<")

    def in_script(self, filename: str) -> bool:
        """A file of the script's own (its folder, installed packages excepted)."""
        return (self.script_dir is not None and filename.startswith(self.script_dir)
                and "-packages" not in filename)

    # ---- what ----------------------------------------------------------------------------------
    def value_read(self, how: str) -> None:
        self.value_reads.setdefault(self.site(2), Counter())[how] += 1

    def host_copy(self) -> None:
        site = self.site(2)
        self.host_copies[site] = self.host_copies.get(site, 0) + 1

    def device_read(self, frame, what: str) -> None:
        """A tensor's device read by the script's own code: kept when the line branches on it
        (it mentions the device type or cuda/cpu), not for `device=x.device` arguments."""
        site = f"{_short(frame.f_code.co_filename)}:{frame.f_lineno}"
        if site in self.device_reads:
            return
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        if what == "is_cuda" or any(w in line for w in (".type", "cuda", "cpu")):
            self.device_reads[site] = what

    def note(self, key: str, text: str) -> None:
        self.notes.setdefault(key, text)

    def refuse(self, what: str, why: str, site: str | None = None) -> NotSupportedInSim:
        """The error to raise; the first one is kept (a script that catches it still fails)."""
        exc = NotSupportedInSim(f"not supported in sim: {what} at {site or self.site(2)} ({why})")
        if self.refused is None:
            self.refused = exc
        return exc

    # ---- the result's notes --------------------------------------------------------------------
    def render(self) -> list[str]:
        out = list(self.notes.values())
        if self.value_reads:
            sites = [f"{s} ({', '.join(f'{k} x{n}' if n > 1 else k for k, n in c.items())})"
                     for s, c in self.value_reads.items()]
            out.append("values read (sim has none; stand-ins answered: 1 for numbers, True for "
                       "conditions, so a branch on a value may differ from the GPU's): "
                       + _listed(sites))
        if self.host_copies:
            out.append("GPU tensors copied to the host (.cpu(), .numpy(), .to('cpu')); their "
                       "values are stand-ins (ones): " + _listed(
                           [f"{s}" + (f" x{n}" if n > 1 else "") for s, n in
                            self.host_copies.items()]))
        if self.device_reads:
            out.append("the script's own lines that branch on a tensor's device saw cuda:0, as "
                       "on the GPU (so do its libraries; torch's own code sees the CPU device "
                       "sim runs on and takes its CPU side where it branches on it): "
                       + _listed([f"{s} ({w})" for s, w in self.device_reads.items()]))
        return out


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_SITES])
    return shown + (f" and {len(items) - MAX_SITES} more" if len(items) > MAX_SITES else "")


# ---- stand-ins ---------------------------------------------------------------------------------
def stand_in(dtype):
    """The value a fake tensor's element reads as (fake_values.stand_in_scalar's)."""
    import torch

    if dtype == torch.bool:
        return True
    return 1.0 if dtype.is_floating_point or dtype.is_complex else 1


def stand_in_list(shape, dtype):
    """`.tolist()` of a fake tensor: nested lists of stand-ins."""
    value = stand_in(dtype)

    def rows(dims):
        return [value] * dims[0] if len(dims) == 1 else [rows(dims[1:]) for _ in range(dims[0])]

    return rows(list(shape)) if len(shape) else value


__all__ = ["NotSupportedInSim", "ScriptLog", "stand_in", "stand_in_list"]
