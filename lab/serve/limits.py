"""What one learner may take from the server: browser tabs, and the work each tab may start.

A served tab is a process on the instructor's machine, and what it runs (a cpu run allocates
real memory; any run takes cores and a place in the GPU queue) is the class's to share. One
learner's cookie once opened 40 tabs (40 app processes, 2.2 GB), and the playground ran cpu mode
at batch 100,000 (6.9 GB). So the instructor sets, with `memlab serve` flags:

    --max-tabs N          tabs (app processes) open at once per learner (default 3); the server
                          counts them (server.py) and refuses the next one with a page that says so
    --tab-modes LIST      the modes a tab may run (default cuda,sim,cpu: every mode this machine has)
    --max-size-factor F   each size a tab's playground sets (batch, seq) at most F times the
                          workload's own size at that scale (default 4)

and always: cpu runs only at the small scale (a seed-scale cpu run is the full-size model in the
server's RAM: lesson 03 holds ~55 GB there).

The server passes the limits to each tab's process in `MEMLAB_TAB_LIMITS` (JSON); the app wraps
its runner in `LimitedRunner`, so every run a tab starts (lessons, the playground) is checked
before it reaches the runner. A refused run comes back as a result whose error is the refusal:
the tab shows it where the run's result would be, with the limit and the flag that sets it; the
playground asks first (`refusal_of`) and says it on its status line, before anything starts.

Headless: no Textual, no aiohttp.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from lab.measure.modes import MODES

LIMITS_ENV = "MEMLAB_TAB_LIMITS"
MAX_TABS = 3
SIZE_FACTOR = 4.0
CPU_SCALES = ("small",)
FLAG = {"max_tabs": "--max-tabs", "modes": "--tab-modes", "size_factor": "--max-size-factor"}


class LimitError(ValueError):
    """A limit given to `memlab serve` that cannot be one (one line)."""


@dataclass(frozen=True)
class TabLimits:
    max_tabs: int = MAX_TABS
    modes: tuple[str, ...] = tuple(MODES)
    size_factor: float = SIZE_FACTOR

    def __post_init__(self):
        if isinstance(self.max_tabs, bool) or not isinstance(self.max_tabs, int) \
                or not 1 <= self.max_tabs <= 1000:
            raise LimitError(f"{FLAG['max_tabs']} must be a whole number from 1 to 1000 "
                             f"(got {self.max_tabs!r})")
        unknown = [m for m in self.modes if m not in MODES]
        if unknown or not self.modes:
            raise LimitError(f"{FLAG['modes']}: {', '.join(map(str, unknown)) or 'none given'}; "
                             f"give some of {', '.join(MODES)}, joined with ','")
        if not isinstance(self.size_factor, (int, float)) or isinstance(self.size_factor, bool) \
                or not 0.01 <= self.size_factor <= 1000:
            raise LimitError(f"{FLAG['size_factor']} must be a number from 0.01 to 1000 "
                             f"(got {self.size_factor!r})")

    # ---- through the environment, to each tab's process ---------------------------------------
    def to_env(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_env(cls, environ=os.environ) -> "TabLimits":
        """The limits the server gave this tab; the defaults when it gave none or garbage."""
        try:
            d = json.loads(environ.get(LIMITS_ENV) or "{}")
            return cls(int(d.get("max_tabs", MAX_TABS)), tuple(d.get("modes", MODES)),
                       float(d.get("size_factor", SIZE_FACTOR)))
        except (ValueError, TypeError, AttributeError):
            return cls()

    # ---- the work a tab may start -------------------------------------------------------------
    def refusal(self, req) -> str | None:
        """Why this workshop does not run `req` (a RunRequest) from a browser tab; None: it may."""
        if req.mode not in self.modes:
            return (f"Not in this workshop: {req.mode} runs are off in a browser tab (the "
                    f"instructor allows {', '.join(self.modes)}: memlab serve {FLAG['modes']}).")
        info = req.mode_info  # real tensors in this host's memory: cpu
        if not info.on_gpu and not info.simulated and req.scale not in CPU_SCALES:
            return (f"Not in this workshop: cpu at {req.scale} scale would run the full-size model "
                    "in the server's memory; a browser tab runs cpu at the small scale (sim "
                    "gives the full size's bytes without the memory).")
        return self._sizes_refusal(req)

    def _sizes_refusal(self, req) -> str | None:
        workload = req.params.get("workload") if req.kind == "experiment" else None
        if workload is None:
            return None  # a lesson: its own parameters, from lesson.toml
        from lab.workloads import get_workload

        try:
            defaults = get_workload(str(workload)).default_sizes(req.scale)
        except (KeyError, ValueError):
            return f"Not in this workshop: no workload {workload!r} at {req.scale} scale."
        for key, value in req.params.items():
            base = defaults.get(key)
            if isinstance(base, bool) or not isinstance(base, int):
                continue  # not a size (a layout's name, the combination)
            most = int(base * self.size_factor)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value > most:
                return (f"Not in this workshop: {key} {_n(value)} is more than a browser tab "
                        f"may run here, at most {most:,} ({self.size_factor:g} × {workload}'s "
                        f"{base:,} at {req.scale} scale; the instructor sets it: memlab serve "
                        f"{FLAG['size_factor']}).")
        return None


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else repr(value)[:30]


class LimitedRunner:
    """A runner that refuses what the tab's limits do not allow (a result whose error says
    why), and hands everything else to the runner it wraps."""

    def __init__(self, runner, limits: TabLimits):
        self.runner, self.limits = runner, limits

    def run(self, request, on_event=None, cancel=None):
        why = self.limits.refusal(request)
        if why is not None:
            from lab.runner.stream import WorkerStream

            return WorkerStream(request).failed("error", why)
        return self.runner.run(request, on_event=on_event, cancel=cancel)

    def __getattr__(self, name: str):  # prestart, parallel, ...: the wrapped runner's
        return getattr(self.runner, name)


def refusal_of(runner, requests) -> str | None:
    """The first refusal `runner` would give any of `requests` (None: not a limited runner, or
    all allowed): a screen says it before it starts anything (the playground's status line)."""
    if not isinstance(runner, LimitedRunner):
        return None
    return next((why for why in map(runner.limits.refusal, requests) if why), None)


def limited(runner):
    """The app's runner in a served tab: wrapped in the limits its server gave it."""
    return LimitedRunner(runner, TabLimits.from_env())


__all__ = ["CPU_SCALES", "LIMITS_ENV", "LimitError", "LimitedRunner", "MAX_TABS", "SIZE_FACTOR",
           "TabLimits", "limited", "refusal_of"]
