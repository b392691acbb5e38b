"""Lesson 20: tensors kept alive by a Python reference cycle until the garbage collector runs.

CPython frees an object as soon as its reference count drops to zero, except when objects
refer to each other in a cycle: then only the cyclic garbage collector (`gc`) frees them, at a
moment that depends on how many Python objects were allocated, not on how many bytes of GPU
memory they hold. A cycle that holds a tensor holds its memory until then.

The cycle here is a common one: an object that stores a callback closing over the object itself.

    class Step:
        def __init__(self, model, x):
            self.out = model(x)                       # (B, d_out), with its autograd graph
            self.on_done = lambda: self.out.sum()     # the lambda refers to self: a cycle

Automatic collection is switched off during the experiment so that every run frees at the same
place; it is switched back on afterwards.
"""

import gc
import weakref

import torch
from torch import nn


class Step:
    def __init__(self, model, x):
        self.out = model(x)  # (B, d_out), its graph keeps x alive too
        self.on_done = lambda: self.out.sum()  # closure over self -> self: a reference cycle


class StepNoCycle:
    def __init__(self, model, x):
        self.out = model(x)
        me = weakref.ref(self)  # a weak reference does not keep `self` alive: no cycle
        self.on_done = lambda: me().out.sum()


def describe(run, found):
    """One note per tensor the collector found: shape, bytes, and who referred to it."""
    for t in found:
        holders = [type(r).__name__ for r in gc.get_referrers(t)
                   if r is not gc.garbage and r is not found]
        run.note(f"in a reference cycle: tensor {tuple(t.shape)} {t.dtype}, "
                 f"{t.untyped_storage().nbytes():,} bytes, referred to by {holders}")
    # returning drops `t`: a loop variable at the caller's level would keep the last tensor
    # (and, through its graph, its input) alive after `del found`


def experiment(run, make, find=False):
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        with run.phase("model", setup=True):
            model = nn.Linear(run.p.d_in, run.p.d_out, device=run.device)
        for i in range(run.p.steps):
            with run.phase(f"step {i}"):
                x = torch.randn(run.p.batch, run.p.d_in, device=run.device)  # (B, d_in)
                step = make(model, x)
                del x
                step.on_done()
            with run.phase(f"del step {i}"):
                del step  # refcount -> 0 without a cycle; with a cycle, nothing happens yet
        if find:
            with run.phase("find the cycles", setup=True):
                gc.set_debug(gc.DEBUG_SAVEALL)  # collected objects go to gc.garbage, not away
                gc.collect()
                found = [o for o in gc.garbage if torch.is_tensor(o)]
                describe(run, found)  # a function: no loop variable is left holding a tensor
                run.metric("tensors_in_cycles", len(found))
                gc.set_debug(0)
                gc.garbage.clear()  # the cycles are garbage again; the next gc.collect() frees them
                del found
        with run.phase("gc.collect()"):
            gc.collect()
    finally:
        gc.set_debug(0)
        if enabled:
            gc.enable()


def baseline(run):
    experiment(run, Step)


def weak_reference(run):
    experiment(run, StepNoCycle)


def find_cycles(run):
    experiment(run, Step, find=True)
