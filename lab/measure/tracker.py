"""The tensor tracker: every storage born and freed, with what it turned out to be.

A `TorchDispatchMode` sees every aten op, on every device, in every mode (real CPU, real CUDA,
FakeTensorMode). After each op it looks at the outputs: a storage it has not seen is *born*
(views share their base's storage, so they are counted once); a weak reference on the storage
fires when the storage dies, which is the *free*. The autograd engine carries the dispatch-mode
stack to its worker threads, so backward ops are seen there too (checked on CUDA in tests/gpu).

What a storage *is* (parameter, gradient, optimizer state, ...) is usually not known at birth
(`nn.Linear` calls `torch.empty` before wrapping the result in a Parameter), so categories are
decided later, by `classify()`, from roots found through PyTorch's global hooks: every module
parameter/buffer registered and every optimizer that stepped while the tracker was on.

torch.distributed (lab/measure/distributed.py): a DTensor (FSDP2's sharded parameters, their
gradients and optimizer state) is a wrapper with no memory of its own; its local shard is what is
counted. FSDP2 frees and re-allocates its all-gather buffers with `UntypedStorage.resize_`, which
no dispatcher op sees; while a tracker is on, that method reports to it (`_resized`).

Other wrapper subclasses (torchao's 8-bit optimizer state) run ops of their own on the tensors
they wrap; the tracker hands their ops on so that those ops run under it and are counted
(tracker_subclasses.py).

The tracker knows no mode: what a mode changes about its ops comes in through `policy` (the
`TrackerPolicy` below; sim's is lab.measure.sim.dispatch.policy.CudaPaths, which the sim backend
gives it) and the observers it tells of every allocation.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Container, Iterable
from typing import Any, Hashable, Protocol

import torch
from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                   register_optimizer_step_pre_hook)

from .torch_compat import (FakeTensor, TorchDispatchMode, has_composite_implicit_kernel,
                           is_traceable_wrapper_subclass, pop_dispatch_mode, push_dispatch_mode,
                           run_composite_implicit, storage_key, tree_flatten)

from .trace import ALLOC, FREE, Event, Trace
from .tracker_hooks import ResizeHook
from .tracker_subclasses import inner_tensors, opens_up

NO_ANSWER = object()  # a policy's `answer` for an op it leaves to the dispatcher


class ExtraAllocations(Protocol):
    """Where a policy reports allocations that back no tensor (the tensor tracker)."""

    def extra_alloc(self, key: Hashable, nbytes: int) -> None: ...

    def extra_transient(self, key: Hashable, nbytes: int) -> None: ...

    def extra_transients(self, items: list[tuple[Hashable, int]]) -> None: ...

    def library_empty_cache(self) -> None: ...


class TrackerPolicy(Protocol):
    """What a mode changes about the ops the tracker sees (sim: CUDA's paths on fake tensors,
    lab.measure.sim.dispatch.policy.CudaPaths). The tracker calls exactly these."""

    rerouted: Container  # ops the tracker hands to `reroute` instead of running them
    # The op's output without the trip through the dispatcher, or NO_ANSWER (then the op runs).
    # A plain function held by the policy (not a method: it is called on every op)
    answer: Any

    def reroute(self, func, args: tuple, kwargs: dict) -> Any:
        """Run `func` as the mode's device would (its parts are dispatched, and counted, one
        by one)."""

    def unmade_outputs(self, func, args: tuple, kwargs: dict, out) -> tuple:
        """Outputs of `func` that the kernel here made and the device's does not: not counted."""

    def after(self, func, args: tuple, kwargs: dict, out, sink: ExtraAllocations) -> None:
        """After `func` ran: the allocations the device makes beside its tensors (workspaces)."""


class StorageObserver(Protocol):
    """What the tracker tells of every allocation it counts (storages, and sim's extras)."""

    def alloc(self, key: Hashable, nbytes: int) -> int | None:
        """May raise torch.OutOfMemoryError: the allocation then fails, as on the GPU. Returns
        the bytes granted where the request is one the device bounds (else None: all)."""

    def free(self, key: Hashable) -> None: ...

    # optional: `empty_cache()`, told where a CUDA library empties the allocator's cache itself


_TORCH_DIR = os.path.dirname(torch.__file__)
_LAB_MEASURE_DIR = os.path.dirname(__file__)
# lab/profile wraps torch.autograd.backward while it profiles a script: not the user's frame
_LAB_PROFILE_DIR = os.path.join(os.path.dirname(_LAB_MEASURE_DIR), "profile")
_SKIP_DIRS = (_TORCH_DIR, _LAB_MEASURE_DIR, _LAB_PROFILE_DIR, os.path.dirname(os.__file__))


def user_frame(limit: int = 40) -> str:
    """'file:line function' of the nearest frame outside torch, this package and the stdlib."""
    f = sys._getframe(2)
    for _ in range(limit):
        if f is None:
            break
        fn = f.f_code.co_filename
        if not _skipped(fn):
            return f"{_short_path(fn)}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back
    return ""


@functools.lru_cache(maxsize=None)  # one answer per source file; asked at every allocation
def _skipped(filename: str) -> bool:
    return filename.startswith(_SKIP_DIRS) or "<frozen" in filename


@functools.lru_cache(maxsize=None)  # one per source file; asked at every allocation
def _short_path(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    if "site-packages" in parts:  # transformers/models/gpt2/modeling_gpt2.py, not the venv path
        return "/".join(parts[parts.index("site-packages") + 1 :])
    return "/".join(parts[-2:])


def _ptr(storage) -> int:
    """Device address of a real CUDA storage (0 elsewhere: fake and CPU storages need none)."""
    return storage.data_ptr() if storage.device.type == "cuda" else 0


_COMPOSITE: dict = {}
_PRIM_DEVICE = torch.ops.prim.device.default

# The kernels that say which code path a run took (RunResult.code_paths): the SDPA kernel, and
# the optimizer's implementation (fused kernels; foreach ops while an optimizer steps).
_ATTENTION_KERNELS = {
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_flash_attention_for_cpu": "flash-cpu",
    "_safe_softmax": "math",  # SDPA's math backend (torch >= 2.5); eager attention uses softmax
}
_PATH_OF: dict = {}


def _path_of(func) -> tuple[str, str] | None:
    """("attention", kernel) | ("fused", "") | ("foreach", "") | None, cached per overload."""
    hit = _PATH_OF.get(func, False)
    if hit is False:
        name = func.__name__.split(".")[0]
        if name in _ATTENTION_KERNELS:
            hit = ("attention", _ATTENTION_KERNELS[name])
        elif name.startswith(("_fused_adam", "_fused_sgd", "_fused_adagrad")):
            hit = ("fused", "")
        elif name.startswith("_foreach_"):
            hit = ("foreach", "")
        else:
            hit = None
        _PATH_OF[func] = hit
    return hit


def output_tensors(out) -> list:
    """The tensors among an op's outputs, in tree_flatten's order: a tensor, or a tuple or list
    of tensors and Nones (nearly every op), without building the pytree; anything else (nested
    containers) through tree_flatten."""
    if isinstance(out, torch.Tensor):
        return [out]
    if type(out) is tuple or type(out) is list:
        tensors = []
        for t in out:
            if isinstance(t, torch.Tensor):
                tensors.append(t)
            elif t is not None:
                break
        else:
            return tensors
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _is_composite(func) -> bool:
    """An aten op implemented by other ops (CompositeImplicitAutograd), cached per overload."""
    hit = _COMPOSITE.get(func)
    if hit is None:
        try:
            hit = has_composite_implicit_kernel(func)
        except Exception:
            hit = False
        _COMPOSITE[func] = hit
    return hit


class TensorTracker(TorchDispatchMode):
    """Records storage births and deaths into a `Trace`, and tells its observers of each."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # TorchDispatchMode wraps __torch_dispatch__ in torch._disable_dynamo unless this says
        # no: the wrapper costs ~25 us per op (a GPT-2 step is ~7,500 ops) and the tracker is
        # never traced by torch.compile
        return False

    def __init__(self, device_type: str | None = None, policy: TrackerPolicy | None = None,
                 observers: Iterable[StorageObserver] = ()):
        super().__init__()
        # sim only: `policy` (lab.measure.sim.dispatch.policy.CudaPaths) answers plain cache hits
        # of the fake mode below, reroutes composite ops CUDA runs differently and names the
        # allocations CUDA makes beside the tensors (workspaces)
        self.policy = policy
        # told of every allocation as it happens, before it is recorded (an observer that raises
        # torch.OutOfMemoryError fails the op: then nothing is born): sim's allocator model,
        # the cpu backend's virtual-GPU capacity guard
        self.observers = tuple(observers)
        self.trace = Trace()
        self.device_type = device_type  # only count storages on this device type (None: all)
        self.phase = ""
        self.live_bytes = 0
        self.peak_bytes = 0
        self._sid_by_cdata: dict[int, int] = {}
        self._nbytes: dict[int, int] = {}  # sid -> bytes as last seen
        self._refs: dict[int, weakref.ref] = {}
        self._born_phase: dict[int, str] = {}
        self._next_sid = 0
        self._lock = threading.RLock()
        self._t0 = time.perf_counter()
        self._closed = False
        self._param_refs: list[weakref.ref] = []
        self._optim_refs: list[weakref.ref] = []
        self._roles: dict[int, str] = {}  # sid -> category learned from roots
        self._hooks: list = []
        self.phase_category: dict[str, str] = {}  # phase -> category for what is born in it
        self.alloc_threads: set[int] = set()  # which threads allocated (autograd's, on CUDA)
        self.attention_kernels: list[str] = []  # SDPA kernels seen, in order of first use
        self._optimizer_ops: set[str] = set()  # "fused" / "foreach" seen inside optimizer.step
        self._stepping = False

    # ---- lifecycle ------------------------------------------------------------------------
    def __enter__(self):
        # re-entered from __torch_dispatch__ (composite ops): the hooks go in once, at the top
        self._depth = getattr(self, "_depth", 0) + 1
        if self._depth == 1:
            self._install_hooks()
        return super().__enter__()

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            try:
                self.scan_roots()
            finally:
                for h in self._hooks:
                    h.remove()
                self._hooks.clear()
        return super().__exit__(*exc)

    def close(self) -> Trace:
        """Stop recording frees and return the finished, classified trace."""
        with self._lock:
            self._closed = True
            self.classify()
            return self.trace

    def _install_hooks(self) -> None:
        mod = torch.nn.modules.module
        self._hooks.append(mod.register_module_parameter_registration_hook(self._on_param))
        self._hooks.append(mod.register_module_buffer_registration_hook(self._on_param))
        self._hooks.append(register_optimizer_step_pre_hook(self._on_step_start))
        self._hooks.append(register_optimizer_step_post_hook(self._on_step))
        self._hooks.append(ResizeHook(self))

    def _on_param(self, module, name, tensor):
        if isinstance(tensor, torch.Tensor):
            self._param_refs.append(weakref.ref(tensor))
            self._mark(tensor, "parameters")

    def _on_step(self, optimizer, args, kwargs):
        self._optim_refs.append(weakref.ref(optimizer))
        self._stepping = False
        self.scan_roots()

    def _on_step_start(self, optimizer, args, kwargs):
        self._stepping = True  # until the post hook: foreach ops now are the optimizer's

    def code_paths(self) -> tuple[list[str], str]:
        """(the SDPA kernels seen, the optimizer implementation: fused | foreach | for-loop,
        "" when no optimizer stepped)."""
        if "fused" in self._optimizer_ops:
            optimizer = "fused"
        elif "foreach" in self._optimizer_ops:
            optimizer = "foreach"
        else:
            optimizer = "for-loop" if self._optim_refs else ""
        return list(self.attention_kernels), optimizer

    # ---- roots and categories ---------------------------------------------------------------
    def watch(self, *objs) -> None:
        """Register roots the global hooks cannot see: modules made before tracking, optimizers."""
        for obj in objs:
            if isinstance(obj, torch.nn.Module):
                for t in list(obj.parameters()) + list(obj.buffers()):
                    self._on_param(obj, "", t)
            elif isinstance(obj, torch.optim.Optimizer):
                self._optim_refs.append(weakref.ref(obj))
        self.scan_roots()

    def mark(self, tensors: Iterable[torch.Tensor] | torch.Tensor, category: str) -> None:
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        for t in tensors:
            self._mark(t, category)

    def label_live_since(self, index: int, category: str) -> int:
        """Give `category` to every storage born since event `index` that is still live and has
        no category yet: the buffers a C++ component made inside one call (DDP's gradient
        buckets). Returns their bytes."""
        with self._lock:
            total = 0
            for sid in self.live_born_since(index):
                if sid not in self._roles and self._nbytes[sid]:
                    self._roles[sid] = category
                    total += self._nbytes[sid]
            return total

    def live_born_since(self, index: int) -> list[int]:
        """The storages (their ids, the allocator model's keys) born since event `index` and
        still live."""
        with self._lock:
            return sorted({e.sid for e in self.trace.events[index:]
                           if e.kind == ALLOC and e.sid in self._refs})

    def _mark(self, t: torch.Tensor, category: str) -> None:
        if is_traceable_wrapper_subclass(t):
            for inner in inner_tensors(t):
                self._mark(inner, category)
            return
        sid = self._sid_of(t)
        if sid is not None:
            # a gradient or optimizer buffer never becomes a "parameter" again; first role wins
            self._roles.setdefault(sid, category)

    def sid_of(self, t: torch.Tensor) -> int | None:
        """The key this tracker gave `t`'s storage (its allocator model's key in sim), or None."""
        return self._sid_of(t)

    def _sid_of(self, t: torch.Tensor) -> int | None:
        try:
            return self._sid_by_cdata.get(storage_key(t.untyped_storage()))
        except Exception:  # sparse, nested, or a subclass without storage
            return None

    def scan_roots(self) -> None:
        """Learn roles from live roots: parameters' grads and optimizer state."""
        with self._lock:
            for ref in self._param_refs:
                p = ref()
                if p is not None and p.grad is not None:
                    self._mark(p.grad, "gradients")
            for ref in self._optim_refs:
                opt = ref()
                if opt is None:
                    continue
                for state in opt.state.values():
                    for v in state.values():
                        if isinstance(v, torch.Tensor):
                            self._mark(v, "optimizer_state")

    def classify(self) -> None:
        """Give every storage in the trace a category (see module docstring)."""
        freed_in_birth_phase: set[int] = set()
        for e in self.trace.events:
            if e.kind == FREE and self._born_phase.get(e.sid) == e.phase:
                freed_in_birth_phase.add(e.sid)
        cats = self.trace.categories
        for e in self.trace.events:
            if e.kind != ALLOC or e.sid in cats:
                continue
            if e.sid in self._roles:
                cats[e.sid] = self._roles[e.sid]
            elif e.phase in self.phase_category:
                cats[e.sid] = self.phase_category[e.phase]
            elif not e.phase:
                cats[e.sid] = "other"
            elif e.sid in freed_in_birth_phase:
                cats[e.sid] = "temporaries"
            else:
                cats[e.sid] = "activations"

    # ---- recording ---------------------------------------------------------------------------
    def now(self) -> float:
        return time.perf_counter() - self._t0

    def register_existing(self, tensors: Iterable[torch.Tensor], category: str = "other") -> None:
        """Count tensors that existed before tracking began, as live from t=0."""
        for t in tensors:
            self._see(t, stack="(before tracking)")
            self._mark(t, category)

    def _see(self, t: torch.Tensor, stack: str | None = None) -> None:
        if type(t) is not FakeTensor and is_traceable_wrapper_subclass(t):
            # count what it wraps, not its phantom storage
            for inner in inner_tensors(t):
                self._see(inner, stack)
            return
        device = t.device
        if device.type == "meta" or (self.device_type and device.type != self.device_type):
            return
        try:
            storage = t.untyped_storage()
        except Exception:
            return
        cdata = storage_key(storage)
        nbytes = storage.nbytes()
        with self._lock:
            sid = self._sid_by_cdata.get(cdata)
            if sid is not None:
                old = self._nbytes[sid]
                if old != nbytes:  # resize_ or an out= that grew/shrank its storage
                    self._emit(FREE, sid, old, "")
                    self._tell_free(sid)
                    self._tell_alloc(sid, nbytes)
                    self._nbytes[sid] = nbytes
                    self._emit(ALLOC, sid, nbytes, stack if stack is not None else user_frame(),
                               _ptr(storage))
                return
            self._tell_alloc(self._next_sid, nbytes)  # may raise: then nothing is born
            sid = self._next_sid
            self._next_sid += 1
            self._sid_by_cdata[cdata] = sid
            self._nbytes[sid] = nbytes
            self._born_phase[sid] = self.phase
            self._refs[sid] = weakref.ref(storage, self._freer(sid, cdata))
            self.alloc_threads.add(threading.get_ident())
            self._emit(ALLOC, sid, nbytes, stack if stack is not None else user_frame(), _ptr(storage))

    def _resized(self, storage) -> None:
        """`storage.resize_(n)` happened: a known storage's bytes were freed and/or allocated
        again (FSDP2's all-gather buffers: resized to 0 after use, back before the next
        all-gather). Storages never seen are left alone (nothing of theirs was counted)."""
        try:
            cdata, nbytes = storage_key(storage), storage.nbytes()
        except Exception:
            return
        with self._lock:
            sid = self._sid_by_cdata.get(cdata)
            if sid is None or self._closed or self._nbytes[sid] == nbytes:
                return
            old, self._nbytes[sid] = self._nbytes[sid], nbytes
            if old:
                self._emit(FREE, sid, old, "")
                self._tell_free(sid)
            if nbytes:
                self._tell_alloc(sid, nbytes)  # may raise: out of memory, as on the GPU
                self._emit(ALLOC, sid, nbytes, user_frame(), _ptr(storage))

    def extra_alloc(self, key, nbytes: int) -> None:
        """An allocation that backs no tensor (sim: a cuBLAS workspace), kept to the end."""
        with self._lock:
            self.trace.extras.append((len(self.trace.events), "alloc", key, nbytes))
            self._tell_alloc(key, nbytes)

    def extra_transient(self, key, nbytes: int) -> None:
        """Scratch a kernel takes and gives back inside one op (sim: attention backward)."""
        self.extra_transients([(key, nbytes)])

    def extra_transients(self, items) -> None:
        """Several scratch allocations of one op, taken in order and given back in reverse (as
        C++ destroys its DataPtrs: a CUDA reduction's staging buffer, then its semaphores)."""
        with self._lock:
            n = len(self.trace.events)
            granted = []
            for key, nbytes in items:
                got = self._tell_alloc(key, nbytes)
                granted.append(nbytes if got is None else got)
                self.trace.extras.append((n, "alloc", key, granted[-1]))
            for (key, _), nbytes in zip(reversed(items), reversed(granted)):
                self.trace.extras.append((n, "free", key, nbytes))
                self._tell_free(key)

    def library_empty_cache(self) -> None:
        """A CUDA library gives the allocator's cached segments back itself, as
        `torch.cuda.empty_cache()` does (sim: cuDNN after each benchmark search)."""
        with self._lock:
            for obs in self.observers:
                empty_cache = getattr(obs, "empty_cache", None)
                if empty_cache is not None:
                    empty_cache()

    def _freer(self, sid: int, cdata: int) -> Callable:
        def on_free(_ref):
            with self._lock:
                self._refs.pop(sid, None)
                if self._sid_by_cdata.get(cdata) == sid:
                    del self._sid_by_cdata[cdata]
                if not self._closed:
                    self._emit(FREE, sid, self._nbytes[sid], "")
                    self._tell_free(sid)

        return on_free

    def _saw(self, path: tuple[str, str]) -> None:
        kind, name = path
        if kind == "attention":
            if name not in self.attention_kernels:
                self.attention_kernels.append(name)
        elif self._stepping:
            self._optimizer_ops.add(kind)

    def _tell_alloc(self, key, nbytes: int) -> int | None:
        """The bytes granted where an observer bounded the request (sim's allocator model, for
        cuDNN's benchmark search), else None."""
        granted = None
        for obs in self.observers:
            got = obs.alloc(key, nbytes)
            if got is not None:
                granted = got if granted is None else min(granted, got)
        return granted

    def _tell_free(self, key) -> None:
        for obs in self.observers:
            obs.free(key)

    def _emit(self, kind: str, sid: int, nbytes: int, stack: str, ptr: int = 0) -> None:
        self.trace.events.append(Event(kind, sid, nbytes, self.now(), self.phase, stack, ptr))
        if kind == ALLOC:
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        else:
            self.live_bytes -= nbytes

    def _redispatch(self, fn, *args, **kwargs):
        """fn(...) with this mode back on the stack, so the ops it runs come here one by one.
        `with self` minus what only the outermost entry does (the flags it sets are already
        set inside __torch_dispatch__, the hooks are in): ~10 us less per composite op."""
        push_dispatch_mode(self)
        try:
            return fn(*args, **kwargs)
        finally:
            pop_dispatch_mode()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _PRIM_DEVICE and type(args[0]) is FakeTensor:
            # C++ asking a fake tensor for its device: two thirds of all dispatches in sim. Answer
            # as FakeTensor itself does, without the trip through FakeTensorMode.
            t = args[0]
            return torch.device("meta") if t.fake_mode.in_kernel_invocation else t.fake_device
        if opens_up(types):
            # A wrapper subclass's own __torch_dispatch__ (torchao's 8-bit optimizer state) runs
            # ops on the plain tensors it wraps. Handing the op on (NotImplemented) lets it run
            # with this mode still on, so those ops, and the intermediates they make, are seen:
            # otherwise only the CUDA allocator sees them (6.8 GB in lesson 14's 8-bit step).
            return NotImplemented
        path = _path_of(func)
        if path is not None:
            self._saw(path)
        policy = self.policy
        if policy is not None and func in policy.rerouted:
            # the rerouted op's parts are dispatched (and counted) one by one
            return self._redispatch(policy.reroute, func, args, kwargs or {})
        if torch.is_inference_mode_enabled() and _is_composite(func):
            # Only under inference_mode (autograd excluded) does a composite op such as cross_entropy
            # reaches this mode whole, and the tensors it makes and frees inside (its
            # log_softmax) would go unseen. Decompose it here, as autograd would have, so each
            # part is dispatched (and counted) on its own. The C++ composite kernel, not
            # `func.decompose`: that prefers a Python decomposition where one is registered, and
            # those can differ (aten.dropout's clones its input when p == 0 or not training; the
            # C++ kernel returns the input itself), so the tracker would change the program.
            out = self._redispatch(run_composite_implicit, func, *args, **(kwargs or {}))
            if out is not NotImplemented:
                return out
        # sim: a plain cache hit of the fake mode below, answered without the dispatcher
        out = policy.answer(func, args, kwargs) if policy is not None else NO_ANSWER
        if out is NO_ANSWER:
            out = func(*args, **(kwargs or {}))
        # outputs CUDA's kernel leaves undefined, which the op's fake kernel still makes (sim)
        unmade = policy.unmade_outputs(func, args, kwargs or {}, out) if policy is not None else ()
        for t in output_tensors(out):
            if not any(t is u for u in unmade):
                self._see(t)
        if policy is not None:
            policy.after(func, args, kwargs or {}, out, self)
        return out
