"""Which of the simulator's mechanisms a sim run took: explicit counters on named functions.

The sim goldens (lab.dev.goldens) are a fixed subset of lesson variants chosen to exercise every
CUDA path (`lab/measure/sim/kernels/`) and every path of the allocator model. This probe proves it
run by run: while it is on, the functions named in `MECHANISMS` are wrapped (in their module or
class, and in every `lab` module that bound the same function object by name, as policy.py binds
`scratch_bytes`), each call is judged by its mechanism's test of the arguments and the result,
and what was taken is recorded. A few mechanisms are read from the result instead (the
allocator's retry and OOM counters).

Why named functions and not `sys.settrace` or coverage, which need no list: measured on lesson 08
baseline in sim, 1.1 s plain, 3.4 s under a settrace hook, 2.2 s under coverage's C tracer, 2.3 s
under cProfile (every Python call pays, and sim makes a million); these counters cost nothing
measurable, so every golden run in the tests is also a coverage run. The price is the list: a
renamed function fails `Probe.__enter__` with the mechanism's name, and the list is kept honest
by tests/unit/test_sim_goldens.py (every `cuda_*` module on disk has a mechanism here, every
mechanism here is taken by some golden).

Not a mechanism here: SDPA's flash backend. On the H200 that recorded the lessons (sm90, cuDNN >
9.15) cuDNN comes first and takes every 16-bit shape flash would; no lesson reaches flash
(tests/unit/test_sim_cuda_paths.py covers the choice).
"""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

SIM_PACKAGE = "lab.measure.sim"

# the allocator model's segment sizes (lab.measure.sim.allocator.model: kSmallSize, kSmallBuffer,
# kLargeBuffer, kMinLargeAlloc), to name which kind of segment a cache miss reserved
_SMALL_SIZE, _SMALL_BUFFER, _LARGE_BUFFER, _MIN_LARGE_ALLOC = 1 << 20, 2 << 20, 20 << 20, 10 << 20
OPTIMIZER_DEFAULT = "optimizer: CUDA's default (foreach)"


@dataclass
class Call:
    """One call of a watched function: what it was given, what it gave back, and what the
    mechanism's `before` read before the call (a block's size before it was split)."""

    args: tuple
    kwargs: dict
    result: Any = None
    before: Any = None

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        return self.args[index] if len(self.args) > index else self.kwargs.get(name, default)


@dataclass(frozen=True)
class Mechanism:
    name: str  # "sdpa: cuDNN attention"
    module: str  # the module of lab/measure/sim it belongs to ("kernels.sdpa")
    what: str  # one line, for the goldens' README table
    # the function whose calls show it ("kernels.sdpa:choose", a module-level function or a
    # Class.method of that module) and the test of one call; a target without ":" names what
    # the probe watches otherwise (an optimizer hook); without a target, `from_fields` tests the
    # golden's `sim` fields (the allocator's counters)
    target: str = ""
    hit: Callable[[Call], bool] = lambda call: True
    before: Callable[[Call], Any] | None = None
    from_fields: Callable[[dict], bool] | None = None


def _allocator(fields: dict) -> dict:
    return fields.get("allocator") or {}


MECHANISMS: tuple[Mechanism, ...] = (
    # ---- CUDA's paths -----------------------------------------------------------------------
    Mechanism("autocast: CUDA's op lists", "kernels.autocast",
              "CPU autocast's kernels cast as CUDA autocast does (lower precision / fp32 lists)",
              "kernels.autocast:_cast_args"),
    Mechanism("autocast: weight cache", "kernels.autocast",
              "lower-precision copies of fp32 leaf weights cached until autocast exits",
              "kernels.autocast:WeightCastCache.cast", lambda c: len(c.args[0].casts) > 0),
    Mechanism("dropout: fused kernel", "kernels.dropout",
              "training dropout takes native_dropout (a bool mask), not the CPU's noise tensor",
              "kernels.dropout:dropout",
              lambda c: bool(c.arg(2, "train")) and 0 < c.arg(1, "p") < 1),
    # the optimizer's default is decided inside torch from two lists kernels.optim patches; the
    # probe sees an optimizer left at the default step while the patch is installed
    Mechanism(OPTIMIZER_DEFAULT, "kernels.optim",
              "an optimizer built without foreach=/fused= steps as on CUDA (foreach)",
              "torch.optim step pre-hook"),
    Mechanism("reductions: staging buffer", "kernels.reduce",
              "a long reduction takes a staging buffer and semaphores (Reduce.cuh's global reduce)",
              "kernels.reduce:staging_bytes", lambda c: c.result[0] > 0),
    Mechanism("sdpa: cuDNN", "kernels.sdpa", "16-bit attention takes cuDNN (sm90, cuDNN > 9.15)",
              "kernels.sdpa:choose", lambda c: c.result == "cudnn"),
    Mechanism("sdpa: mem-efficient", "kernels.sdpa",
              "fp32 attention takes the mem-efficient kernel",
              "kernels.sdpa:choose", lambda c: c.result == "efficient"),
    Mechanism("sdpa: math", "kernels.sdpa",
              "math attention: chosen (fp32 grouped-query) or forced by sdpa_kernel",
              "kernels.sdpa:choose", lambda c: c.result == "math"),
    Mechanism("sdpa: kernel scratch", "kernels.sdpa",
              "cuDNN / mem-efficient kernels' scratch taken and given back inside the op",
              "kernels.sdpa:scratch_bytes", lambda c: c.result > 0),
    Mechanism("sdpa: inference_mode", "kernels.sdpa",
              "under inference_mode the tracker runs the composite op CUDA's way itself",
              "kernels.sdpa:CudaSdpa.reroute", lambda c: c.result is not NotImplemented),
    Mechanism("sdpa math: ported composite", "kernels.sdpa_math",
              "torch 2.11's _scaled_dot_product_attention_math, CUDA's branches",
              "kernels.sdpa_math:math_attention"),
    Mechanism("sdpa math: _safe_softmax parts", "kernels.sdpa_math",
              "_safe_softmax rerouted to the parts CUDA's kernel makes",
              "kernels.sdpa_math:safe_softmax"),
    Mechanism("fake values: no padding mask", "dispatch.fake_values",
              "transformers' mask decisions on a fake tensor answered as for unpadded data",
              # the masks' tests get integer position ids or a bool / int padding mask;
              # stand_in_scalar (the next one) asks `_fake` about float step counts and norms
              "dispatch.fake_values:_fake",
              lambda c: c.result is True and not c.args[0].is_floating_point()),
    Mechanism("fake values: stand-in .item()", "dispatch.fake_values",
              "run.stand_in_values: .item() of a fake tensor answers a stand-in",
              "dispatch.fake_values:stand_in_scalar"),
    Mechanism("backward: in-place accumulation", "kernels.grad_accumulate",
              "a plain run's engine sums a tensor's two gradients in place (InputBuffer)",
              "kernels.grad_accumulate:_in_place_ok", lambda c: c.result is True),
    Mechanism("cuBLASLt workspace", "dispatch.policy",
              "an addmm with a bias takes cuBLASLt's 1 MiB workspace (besides cuBLAS's 32 MiB)",
              "dispatch.policy:_uses_cublaslt", lambda c: c.result is True),
    # ---- the caching allocator's model --------------------------------------------------------
    Mechanism("allocator: small segment", "allocator.model",
              "a request <= 1 MiB reserves a 2 MiB segment",
              "allocator.model:allocation_size", lambda c: c.result == _SMALL_BUFFER),
    Mechanism("allocator: 20 MiB segment", "allocator.model",
              "a large request under 10 MiB reserves a 20 MiB segment",
              "allocator.model:allocation_size",
              lambda c: _SMALL_SIZE < c.args[0] < _MIN_LARGE_ALLOC),
    Mechanism("allocator: rounded segment", "allocator.model",
              "a request of 10 MiB or more reserves itself rounded to 2 MiB",
              "allocator.model:allocation_size", lambda c: c.args[0] >= _MIN_LARGE_ALLOC),
    Mechanism("allocator: cached block reused", "allocator.model",
              "best fit finds a free cached block",
              "allocator.model:CachingAllocatorModel._get_free_block",
              lambda c: c.result is not None),
    Mechanism("allocator: block split", "allocator.model",
              "a found block is split, the rest stays free",
              "allocator.model:CachingAllocatorModel._hand_out", lambda c: c.result.size < c.before,
              before=lambda c: c.args[2].size),
    Mechanism("allocator: unsplit remainder", "allocator.model",
              "a block handed out whole, larger than asked (max allocated grows past the tensors)",
              "allocator.model:CachingAllocatorModel._hand_out",
              lambda c: c.result.size > c.args[3]),
    Mechanism("allocator: blocks merged", "allocator.model",
              "a freed block merges with a free neighbour",
              "allocator.model:CachingAllocatorModel._merge", lambda c: c.args[1].size > c.before,
              before=lambda c: c.args[1].size),
    Mechanism("allocator: retry after freeing the cache", "allocator.model",
              "a failed cudaMalloc frees every cached segment and tries again (num_alloc_retries)",
              from_fields=lambda f: _allocator(f).get("num_alloc_retries", 0) > 0),
    Mechanism("allocator: out of memory", "allocator.model", "the model raises OOM under the cap",
              from_fields=lambda f: _allocator(f).get("num_ooms", 0) > 0 and f["status"] == "oom"),
    Mechanism("allocator: empty_cache", "allocator.replay",
              "torch.cuda.empty_cache() gives the cached segments back",
              "allocator.replay:Replay.empty_cache"),
    Mechanism("allocator: expandable segments map", "allocator.expandable",
              "expandable_segments:True maps pages into one growing segment",
              "allocator.expandable:ExpandableSegments._map", lambda c: c.result is True),
    Mechanism("allocator: expandable segments unmap", "allocator.expandable",
              "free whole pages of an expandable segment are unmapped (retry, empty_cache)",
              "allocator.expandable:ExpandableSegments._unmap", lambda c: not c.args[2].mapped),
    Mechanism("allocator: max_split_size_mb", "allocator.settings",
              "under max_split_size_mb a large block is handed out under the size rules (lesson 23)",
              "allocator.model:CachingAllocatorModel._hand_out",
              lambda c: c.args[0].max_split_size < (1 << 60) and not c.args[1].small),
    Mechanism("allocator: roundup_power2_divisions", "allocator.settings",
              "a request rounded up to its power-of-two interval's division, not to 512 B",
              "allocator.model:round_size",
              lambda c: bool(c.arg(1, "divisions")) and c.result != -(-c.args[0] // 512) * 512),
    Mechanism("allocator: garbage_collection_threshold", "allocator.release",
              "over the threshold, cached blocks unused longest are freed before a new segment",
              "allocator.release:ReleaseRules._garbage_collect"),
    Mechanism("torch.cuda's allocator API from the model", "facade.memory_api",
              "an experiment's torch.cuda.memory_stats() answered by the allocator model",
              "allocator.view:memory_stats"),
    Mechanism("save_on_cpu: pinned host copies", "kernels.offload",
              "saved tensors leave the device for pinned host memory and come back in backward",
              "kernels.offload:PinnedHostModel.alloc"),
    Mechanism("allocator: streams", "allocator.model",
              "a block on another stream than the default (FSDP2's all-gather / reduce-scatter)",
              "allocator.model:CachingAllocatorModel.malloc", lambda c: c.arg(2, "stream", 0) != 0),
)


@dataclass
class _Patch:
    owner: object  # a module or a class
    name: str
    original: object


@dataclass
class Probe:
    """`with Probe() as p: <a sim run>`; then `p.taken(fields)`: the mechanisms it took.

    Also says whether the run built a transformers model (`p.used_transformers`): such a
    golden depends on the transformers version (model code differs between versions)."""

    hits: set[str] = field(default_factory=set)
    used_transformers: bool = False
    _patches: list[_Patch] = field(default_factory=list)
    _hooks: list = field(default_factory=list)
    _optim_installed: int = 0

    def __enter__(self) -> Probe:
        _import_engine()
        try:
            by_target: dict[str, list[Mechanism]] = {}
            for m in MECHANISMS:
                if ":" in m.target:
                    by_target.setdefault(m.target, []).append(m)
            for target, mechanisms in by_target.items():
                self._wrap(target, self._judge(mechanisms))
            self._watch_optimizers()
            self._watch_transformers()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for patch in reversed(self._patches):
            setattr(patch.owner, patch.name, patch.original)
        self._patches.clear()
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()

    def taken(self, fields: dict) -> list[str]:
        """The mechanisms this run took, in table order (`fields`: the golden's `sim` part)."""
        return [m.name for m in MECHANISMS
                if m.name in self.hits or (m.from_fields is not None and m.from_fields(fields))]

    # ---- wrapping ------------------------------------------------------------------------------
    def _judge(self, mechanisms: list[Mechanism]):
        def on_call(fn, args, kwargs):
            # each mechanism is judged until it is first taken: a hot path soon costs one test
            pending = [m for m in mechanisms if m.name not in self.hits]
            if not pending:
                return fn(*args, **kwargs)
            call = Call(args, kwargs)
            befores = [m.before(call) if m.before else None for m in pending]
            call.result = fn(*args, **kwargs)
            for m, before in zip(pending, befores):
                call.before = before
                if m.hit(call):
                    self.hits.add(m.name)
            return call.result

        return on_call

    def _wrap(self, target: str, on_call) -> None:
        module_name, _, qualname = target.partition(":")
        module = importlib.import_module(f"{SIM_PACKAGE}.{module_name}")
        owner, parts = module, qualname.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part, None)
        name = parts[-1]
        original = getattr(owner, "__dict__", {}).get(name)
        if not callable(original):
            raise LookupError(f"sim probe: {SIM_PACKAGE}.{module_name} has no function {qualname} "
                              "(renamed? update MECHANISMS in lab/dev/sim_probe.py)")

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            return on_call(original, args, kwargs)

        self._set(owner, name, wrapper)
        if owner is module:  # `from ..kernels.sdpa import scratch_bytes` bound it elsewhere too
            for other in list(sys.modules.values()):
                namespace = getattr(other, "__dict__", None)
                if other is module or not getattr(other, "__name__", "").startswith("lab."):
                    continue
                for bound, value in list((namespace or {}).items()):
                    if value is original:
                        self._set(other, bound, wrapper)

    def _set(self, owner, name: str, value) -> None:
        self._patches.append(_Patch(owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def _watch_optimizers(self) -> None:
        """An optimizer left at PyTorch's default implementation stepping while kernels.optim's
        lists are installed (torch's public step pre-hook; install/uninstall counted here)."""
        import torch.optim.optimizer as optimizer

        from lab.measure.sim.kernels.optim import CudaOptimDefaults as cls

        install, uninstall = cls.__dict__["install"], cls.__dict__["uninstall"]

        def counted_install(this):
            install(this)
            self._optim_installed += this._devices is not None

        def counted_uninstall(this):
            self._optim_installed -= this._devices is not None
            uninstall(this)

        self._set(cls, "install", counted_install)
        self._set(cls, "uninstall", counted_uninstall)

        def pre_step(opt, args, kwargs):
            d = opt.defaults
            if self._optim_installed > 0 and "foreach" in d and d["foreach"] is None \
                    and not d.get("fused"):
                self.hits.add(OPTIMIZER_DEFAULT)

        self._hooks.append(optimizer.register_optimizer_step_pre_hook(pre_step))

    def _watch_transformers(self) -> None:
        try:
            import transformers
        except ImportError:
            return
        cls = transformers.PreTrainedModel
        init = cls.__dict__["__init__"]

        @functools.wraps(init)
        def counted_init(this, *args, **kwargs):
            self.used_transformers = True
            return init(this, *args, **kwargs)

        self._set(cls, "__init__", counted_init)


def _import_engine() -> None:
    """Every module of lab.measure, imported before wrapping: a module imported later would bind
    the wrapper by name (`from ..kernels.sdpa import scratch_bytes`) and keep it after the probe."""
    import pkgutil

    import lab.measure

    for info in pkgutil.walk_packages(lab.measure.__path__, "lab.measure."):
        importlib.import_module(info.name)


def sim_modules() -> list[str]:
    """The modules of lab/measure/sim on disk that are CUDA's paths (its kernels/ folder), as
    MECHANISMS names them ("kernels.sdpa")."""
    from pathlib import Path

    package = importlib.import_module(f"{SIM_PACKAGE}.kernels")
    return sorted(f"kernels.{p.stem}" for p in Path(package.__file__).parent.glob("*.py")
                  if p.name != "__init__.py")


__all__ = ["MECHANISMS", "OPTIMIZER_DEFAULT", "Mechanism", "Probe", "sim_modules"]
