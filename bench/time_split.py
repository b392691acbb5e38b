"""Where a sim run's CPU time goes, by component: a bench helper (bench/sim_speed.py).

    with TimeSplit() as split:        # wraps the functions of COMPONENTS while inside
        measure(fn, spec, backend)
    split.seconds()                   # {"fake tensors (FakeTensorMode)": 3.1, "tracker": 0.9, ...}

Each wrapped function charges the CPU time of the main thread (time.thread_time) spent inside it,
minus what nested wrapped functions take, to its component; what no wrapped function covers is
"experiment, model code, autograd". Only the main thread is split: sim runs backward on the
calling thread (the fake device is the CPU), so that is the whole run. The wrappers cost about
a microsecond a call; `overhead_s()` says how much they added, so the split is comparable with
an unwrapped run's total.

Phases are timed as well (CPU seconds between `run.phase` boundaries, "model" = the model build).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from contextlib import contextmanager

OTHER = "experiment, model code, autograd"


def _components():
    """(owner, attribute, component): the functions a sim run's time is split by."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    import lab.measure.measure as measure
    import lab.measure.tracker as tracker
    from lab.measure.backends.sim import SimBackend
    from lab.measure.result import RunResult
    from lab.measure.sim.allocator.replay import Replay
    from lab.measure.sim.dispatch.fake_mode import SimFakeTensorMode
    from lab.measure.sim.dispatch.policy import CudaPaths, _Rerouted
    from lab.runner import worker

    return [
        (FakeTensorMode, "__torch_dispatch__", "fake tensors (FakeTensorMode)"),
        # sim's own entry (lab/measure/sim/dispatch/fake_mode.py), to the cache without the above
        (SimFakeTensorMode, "__torch_dispatch__", "fake tensors (FakeTensorMode)"),
        (tracker.TensorTracker, "__torch_dispatch__", "tracker dispatch"),
        (tracker.TensorTracker, "close", "result building"),
        (tracker, "user_frame", "tracker: user_frame()"),
        (CudaPaths, "after", "policy hooks"),
        (CudaPaths, "unmade_outputs", "policy hooks"),
        (CudaPaths, "reroute", "policy hooks"),
        (_Rerouted, "__contains__", "policy hooks"),
        (Replay, "alloc", "allocator model"),
        (Replay, "free", "allocator model"),
        (Replay, "finish", "allocator model"),
        (measure, "_fill", "result building"),
        (SimBackend, "finish", "result building"),
        (RunResult, "to_dict", "result building"),
        (worker, "load_experiment", "experiment import"),
        (measure, "warm_up_dispatch_mode", "dispatch warm-up"),
    ]


class TimeSplit:
    def __init__(self, clock=time.thread_time):
        self.clock = clock
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: Counter = Counter()
        self.phases: dict[str, float] = defaultdict(float)
        self._stack = [OTHER]
        self._mark = 0.0
        self._main = threading.get_ident()
        self._undo: list = []
        self._t0 = 0.0

    # ---- wrapping ---------------------------------------------------------------------------
    def _wrap(self, fn, component: str):
        split = self

        def wrapped(*args, **kwargs):
            if threading.get_ident() != split._main:
                return fn(*args, **kwargs)
            now = split.clock()
            split.spent[split._stack[-1]] += now - split._mark
            split._mark = now
            split._stack.append(component)
            split.calls[component] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                now = split.clock()
                split.spent[component] += now - split._mark
                split._mark = now
                split._stack.pop()

        wrapped.__wrapped__ = fn
        return wrapped

    def __enter__(self):
        from lab.measure import session

        for owner, name, component in _components():
            raw = owner.__dict__[name]
            if isinstance(raw, (classmethod, staticmethod)):
                new = type(raw)(self._wrap(raw.__func__, component))
            else:
                new = self._wrap(raw, component)
            setattr(owner, name, new)
            self._undo.append((owner, name, raw))
        original_phase = session.Session.phase

        @contextmanager
        def phase(sess, name, **kw):
            start = self.clock()
            with original_phase(sess, name, **kw) as rec:
                yield rec
            self.phases[name] += self.clock() - start

        session.Session.phase = phase
        self._undo.append((session.Session, "phase", original_phase))
        self._t0 = self._mark = self.clock()
        return self

    def __exit__(self, *exc):
        now = self.clock()
        self.spent[self._stack[-1]] += now - self._mark
        self.total = now - self._t0
        for owner, name, raw in reversed(self._undo):
            setattr(owner, name, raw)
        self._undo.clear()

    # ---- reading ----------------------------------------------------------------------------
    def seconds(self) -> dict[str, float]:
        return dict(sorted(self.spent.items(), key=lambda kv: -kv[1]))

    def overhead_s(self, per_call_s: float = 1e-6) -> float:
        """A rough figure for what the wrappers themselves cost (two clock reads a call)."""
        return sum(self.calls.values()) * per_call_s


def measure_wrapper_cost(n: int = 200_000) -> float:
    """Seconds one wrapped call costs beyond the call itself (measured here, on this machine)."""
    split = TimeSplit()
    split._t0 = split._mark = split.clock()

    def f():
        return None

    w = split._wrap(f, "x")
    c = time.thread_time()
    for _ in range(n):
        f()
    bare = time.thread_time() - c
    c = time.thread_time()
    for _ in range(n):
        w()
    return max(0.0, (time.thread_time() - c - bare) / n)


__all__ = ["OTHER", "TimeSplit", "measure_wrapper_cost"]
