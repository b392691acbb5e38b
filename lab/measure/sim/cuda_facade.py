"""The CUDA facade: a CUDA training script, unmodified, runs in sim as if on the chosen GPU.

    with CudaFacade(allocator, gpu("h200"), policy=policy, script_dir=folder) as facade:
        runpy.run_path("train.py", run_name="__main__")
    facade.log.render()     # what the result must say (values read, writes skipped, ...)

ONE context manager, installed and restored as a unit, over sim's FakeTensorMode, SimPolicy and
tensor tracker (lab.measure.measure enters those):

- where tensors live: a TorchFunctionMode (lab.measure.sim.cuda_placement) rewrites `cuda`
  to fake CPU tensors and keeps host tensors real (a mode reaches factories, `torch.device`
  arguments, `torch.set_default_device("cuda")`'s DeviceContext, `Tensor.cuda/.to/.pin_memory`,
  `Module.cuda/.to` through them, numpy data via `torch.from_numpy`);
- what a mode cannot reach is patched from the table `INTERCEPTED` below (each row: where,
  what, what sim answers; docs/SIMULATION.md renders it): `torch.cuda`'s runtime (a GPU is
  there: the chosen card's row of lab.measure.sim.gpus), its memory API (answered by the
  allocator model: lab.measure.sim.cuda_memory_api), CUDA autocast (routed to CPU autocast,
  which SimPolicy's CudaAutocast makes take CUDA's op lists), GradScaler's step, CUDA
  generators, `torch.save` (not written), DataLoader workers (in this process);
  `torch.compile` is lab/profile/compiled.py's in every mode (in sim: eager, said first);
- values: stand-ins, and the sites that read them (lab.measure.sim.script_values); with the
  policy given, SimPolicy stands for a run without memlab's tracker (`plain_run`): the truth a
  user's script is judged by is its own max_memory_allocated.

Anything `torch.cuda` does that is not in the table reaches `torch.cuda._lazy_init`, which
here refuses in one line: "not supported in sim: torch.cuda.X at train.py:N".
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import warnings
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from operator import attrgetter

import torch

from .. import torch_compat
from ..torch_compat import FakeTensor
from .allocator_replay import Replay
from .cuda_memory_api import MemoryApi
from .cuda_placement import DevicePlacement, device_reads_of_fake
from .gpus import Gpu
from .script_values import ScriptLog


@dataclass(frozen=True)
class Intercept:
    owner: str  # the module or class the name lives in
    name: str
    answer: str  # what sim answers instead (docs/SIMULATION.md shows it)
    impl: str = ""  # the CudaRuntime attribute that answers (default: `name`)


def _rows(owner: str, names: str, answer: str, prefix: str = "") -> tuple[Intercept, ...]:
    return tuple(Intercept(owner, n, answer, prefix + n) for n in names.split())


_MEMORY = ("memory_allocated max_memory_allocated memory_reserved max_memory_reserved "
           "memory_stats mem_get_info reset_peak_memory_stats memory_summary empty_cache "
           "set_per_process_memory_fraction get_per_process_memory_fraction")
_LEGACY_MEMORY = {"memory_cached": "memory.memory_reserved",
                  "max_memory_cached": "memory.max_memory_reserved",
                  "reset_max_memory_allocated": "memory.reset_peak_memory_stats",
                  "reset_max_memory_cached": "memory.reset_peak_memory_stats"}
_AUTOCAST_FNS = ("is_autocast_enabled get_autocast_dtype set_autocast_enabled set_autocast_dtype "
                 "get_autocast_gpu_dtype set_autocast_gpu_dtype")

INTERCEPTED: tuple[Intercept, ...] = (
    *_rows("torch.cuda", "is_available is_initialized init device_count current_device "
           "set_device synchronize ipc_collect",
           "one GPU, device 0, initialised; waits for nothing"),
    *_rows("torch.cuda", "get_device_name get_device_capability get_device_properties "
           "is_bf16_supported is_tf32_supported",
           "the chosen card's row (lab/measure/sim/gpus.py)"),
    *_rows("torch.cuda", "Stream Event current_stream default_stream stream set_stream device "
           "device_of is_current_stream_capturing", "streams (torch.cpu's, which the allocator model keeps apart) and events "
           "(timing this CPU); device contexts do nothing"),
    *_rows("torch.accelerator", "is_available current_accelerator device_count "
           "current_device_index current_device_idx set_device_index set_device_idx "
           "device_index synchronize current_stream set_stream",
           "the accelerator is CUDA: the chosen card, device 0", "accelerator_"),
    *(Intercept(owner, n, "the allocator model's counters (predicted)", impl)
      for owner in ("torch.accelerator", "torch.accelerator.memory")
      for n, impl in (("memory_allocated", "memory.memory_allocated"),
                      ("max_memory_allocated", "memory.max_memory_allocated"),
                      ("memory_reserved", "memory.memory_reserved"),
                      ("max_memory_reserved", "memory.max_memory_reserved"),
                      ("memory_stats", "memory.memory_stats"),
                      ("reset_peak_memory_stats", "memory.reset_peak_memory_stats"),
                      ("get_memory_info", "memory.mem_get_info"),
                      ("empty_cache", "memory.empty_cache"))),
    Intercept("torch.accelerator", "Graph", "refused in one line (a graph replays kernels sim "
              "never runs)", "RefusedGraph"),
    Intercept("torch.Tensor", "record_stream", "nothing (the allocator model keeps no stream "
              "uses)", "record_stream"),
    *(Intercept("torch.cuda", n, "refused in one line (a graph replays kernels sim never runs)",
                impl) for n, impl in (("CUDAGraph", "RefusedGraph"), ("graph", "RefusedGraph"),
                                      ("make_graphed_callables", "refuse_graphs"))),
    *_rows("torch.cuda", "get_rng_state set_rng_state get_rng_state_all set_rng_state_all "
           "manual_seed manual_seed_all seed seed_all initial_seed default_generators",
           "one host generator stands for the GPU's"),
    *_rows("torch.cuda", _MEMORY, "the allocator model's counters (predicted)", "memory."),
    *_rows("torch.cuda.memory", _MEMORY, "the allocator model's counters (predicted)", "memory."),
    *(Intercept(owner, n, "the allocator model's counters (predicted)", impl)
      for owner in ("torch.cuda", "torch.cuda.memory") for n, impl in _LEGACY_MEMORY.items()),
    *_rows("torch.cuda.memory", "_record_memory_history _dump_snapshot",
           "nothing recorded or written (--snapshot writes sim's)"),
    *_rows("torch.cuda.nvtx", "range_push range_pop mark range", "nothing (no profiler)",
           "nvtx_"),
    *(Intercept(owner, "_lazy_init", "refuses in one line: anything else torch.cuda does, and "
                "a tensor made on the real CUDA device past the placement mode")
      for owner in ("torch.cuda", "torch.cuda.memory", "torch.cuda.random")),
    Intercept("torch", "Generator", "device='cuda' makes a host generator"),
    *_rows("torch", _AUTOCAST_FNS, "'cuda' asks CPU autocast (which takes CUDA's op lists)",
           "autocast_"),
    Intercept("torch.amp.autocast_mode", "is_autocast_available", "True for 'cuda'",
              "autocast_is_autocast_available"),
    Intercept("torch.amp.autocast_mode.autocast", "__init__",
              "autocast('cuda') (and torch.cuda.amp.autocast) runs CPU autocast with CUDA's "
              "default dtype", "autocast_init"),
    Intercept("torch.amp.grad_scaler.GradScaler", "_maybe_opt_step",
              "no inf/NaN gradients assumed: every step is taken", "scaler_step"),
    Intercept("torch.nn.Module", "_apply", "Module.cuda()/.to('cuda') of a model built on the "
              "host: one GPU copy per parameter, tied parameters stay one", "module_apply"),
    Intercept("torch", "save", "nothing written, noted; the file's contents kept as shapes"),
    Intercept("torch", "load", "what the script's torch.save kept, made again; a real file on "
              "the host, its tensors moved to the GPU when map_location is cuda"),
    Intercept("torch.utils.data.DataLoader", "_get_iterator",
              "workers run in this process", "dataloader_iterator"),
    Intercept("torch._subclasses.fake_tensor.FakeTensor", "device",
              "cuda:0 to the script's own code (its device branches go the GPU's way, noted), "
              "the CPU to torch and libraries", "fake_device"),
    Intercept("torch._subclasses.fake_tensor.FakeTensor", "tolist",
              "nested lists of stand-ins (its own would read every element)", "fake_tolist"),
)


def _owner(path: str):
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, name = path.rpartition(".")
        return attrgetter(name)(importlib.import_module(module))


def owners() -> dict[str, object]:
    """Every namespace the table patches (tests compare their vars() before and after)."""
    return {row.owner: _owner(row.owner) for row in INTERCEPTED}


def docs_table() -> str:
    """The table as docs/SIMULATION.md shows it (a test keeps the two equal): one row per
    namespace and answer."""
    groups: dict[str, tuple[dict, dict]] = {}
    for row in INTERCEPTED:
        owners_, names = groups.setdefault(row.answer, ({}, {}))
        owners_[f"`{row.owner}`"] = names[f"`{row.name}`"] = None
    lines = ["| where | names | what sim answers |", "|---|---|---|"]
    lines += [f"| {', '.join(where)} | {', '.join(names)} | {answer} |"
              for answer, (where, names) in groups.items()]
    return "\n".join(lines)


def _autocast_device(device_type):
    return "cpu" if device_type is None or device_type == "cuda" else device_type


class _DeviceProperties:
    """What torch.cuda.get_device_properties() returns, from a row of lab.measure.sim.gpus."""

    def __init__(self, g: Gpu):
        self.name = g.device_name
        self.major, self.minor = g.capability
        self.total_memory = g.total_bytes
        self.multi_processor_count = g.sms
        self.is_integrated = self.is_multi_gpu_board = 0
        self.warp_size = 32
        # threads per SM by compute capability (CUDA programming guide, table of features)
        self.max_threads_per_multi_processor = {(7, 5): 1024, (8, 6): 1536, (8, 9): 1536}.get(
            g.capability, 2048)

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count}) (simulated)")


class _Nothing:
    """torch.cuda.device(i) / device_of(t): one GPU, so selecting it changes nothing."""

    def __init__(self, *args, **kwargs):
        self.idx = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class CudaRuntime:
    """The answers the table's rows name (`Intercept.impl`)."""

    def __init__(self, facade: "CudaFacade"):
        self.facade = facade
        self.gpu = facade.gpu
        self.memory = facade.memory
        log = self.log = facade.log
        runtime = self

        import torch.cpu as cpu

        self._cpu = cpu

        class Stream(cpu.Stream):
            """A CUDA stream in sim: a torch.cpu stream (the allocator model numbers the
            stream code selects, lab.measure.sim.policy)."""

            def __init__(self, device=None, priority: int = 0, **kwargs):
                super().__init__(priority)
                self.priority, self.cuda_stream = priority, id(self)
                self.device = torch.device("cuda", 0)

            def query(self) -> bool:
                return True

            def synchronize(self) -> None:
                pass

            def is_capturing(self) -> bool:  # no CUDA graph is ever captured in sim
                return False

            def record_event(self, event=None):
                event = event or runtime.Event()
                event.record(self)
                return event

            def __eq__(self, other):
                return self is other

            __hash__ = object.__hash__

        class Event:
            """A CUDA event in sim: `elapsed_time` is the wall time of the simulation on this
            CPU between the two records, not the GPU's (sim has no timing)."""

            def __init__(self, enable_timing: bool = False, blocking: bool = False,
                         interprocess: bool = False, **kwargs):
                self.t = None

            def record(self, stream=None) -> None:
                self.t = time.perf_counter()
                log.note("events", "CUDA events time this CPU running the simulation, not the "
                                   "GPU (sim predicts memory, not time)")

            def query(self) -> bool:
                return True

            def wait(self, stream=None) -> None:
                pass

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end) -> float:
                return 1000.0 * ((end.t or 0.0) - (self.t or 0.0))

        class RefusedGraph:
            """torch.cuda.CUDAGraph / torch.cuda.graph: a class still (libraries annotate with
            `torch.cuda.CUDAGraph | None`), refused when made."""

            def __init__(self, *args, **kwargs):
                runtime.refuse_graphs()

        self.Stream, self.Event, self.RefusedGraph = Stream, Event, RefusedGraph
        self._default = Stream()
        self.device = self.device_of = _Nothing

        base = torch_compat.generator_base

        class _GeneratorMeta(type(base)):
            def __instancecheck__(cls, obj):  # generators made before the facade are ones too
                return isinstance(obj, base)

        class Generator(base, metaclass=_GeneratorMeta):
            """torch.Generator(device="cuda") in sim: a host generator."""

            def __new__(cls, device="cpu"):
                return base.__new__(cls, "cpu" if _is_cuda_device(device) else device)

            def __init__(self, device="cpu"):
                pass

        self.Generator = Generator
        self._gen = base("cpu")
        self._gen.manual_seed(torch.initial_seed())
        self.default_generators = (self._gen,)
        self.saved: dict = {}  # torch.save's file -> what it kept (torch.load gives it back)
        self._orig = {}  # the originals the table's answers wrap, filled by CudaFacade

    # ---- the runtime ---------------------------------------------------------------------------
    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def init(self) -> None:
        pass

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def set_device(self, device) -> None:
        index = device if isinstance(device, int) else torch.device(device).index
        if index not in (None, 0):
            raise self.log.refuse(f"torch.cuda.set_device({device!r})", "sim has one GPU, "
                                  "cuda:0; several GPUs run as ranks (memlab fit --gpus)")

    def synchronize(self, device=None) -> None:
        pass

    def ipc_collect(self) -> None:
        pass

    def get_device_name(self, device=None) -> str:
        return self.gpu.device_name

    def get_device_capability(self, device=None) -> tuple[int, int]:
        return self.gpu.capability

    def get_device_properties(self, device=None) -> _DeviceProperties:
        return _DeviceProperties(self.gpu)

    def is_bf16_supported(self, including_emulation: bool = True) -> bool:
        return self.gpu.capability >= (8, 0) or including_emulation

    def is_tf32_supported(self) -> bool:
        return self.gpu.capability >= (8, 0)

    # ---- streams -------------------------------------------------------------------------------
    def current_stream(self, device=None):
        current = torch_compat.cpu_current_stream()
        return current if isinstance(current, self.Stream) else self._default

    def default_stream(self, device=None):
        return self._default

    def is_current_stream_capturing(self) -> bool:
        return False

    def _handle(self, stream):
        """The torch.cpu stream that stands for `stream` (the default one for the default)."""
        return torch_compat.cpu_default_stream() if stream is self._default else stream

    def stream(self, stream):
        return self._cpu.StreamContext(None if stream is None else self._handle(stream))

    def set_stream(self, stream) -> None:
        if stream is not None:
            torch_compat.set_cpu_current_stream(self._handle(stream))

    def record_stream(self, tensor, stream) -> None:
        pass

    def refuse_graphs(self, *args, **kwargs):
        raise self.log.refuse("CUDA graphs (torch.cuda.CUDAGraph, graph, make_graphed_callables)",
                              "a graph replays captured kernels, which sim never runs")

    # ---- torch.accelerator: CUDA ------------------------------------------------------------------
    def accelerator_is_available(self) -> bool:
        return True

    def accelerator_current_accelerator(self, check_available: bool = False):
        return torch.device("cuda")

    def accelerator_device_count(self) -> int:
        return 1

    def accelerator_current_device_index(self) -> int:
        return 0

    accelerator_current_device_idx = accelerator_current_device_index

    def accelerator_set_device_index(self, device) -> None:
        self.set_device(device)

    accelerator_set_device_idx = accelerator_set_device_index

    @property
    def accelerator_device_index(self):
        return _Nothing

    def accelerator_synchronize(self, device=None) -> None:
        pass

    def accelerator_current_stream(self, device=None):
        return self.current_stream(device)

    def accelerator_set_stream(self, stream) -> None:
        self.set_stream(stream)

    # ---- random numbers ------------------------------------------------------------------------
    def get_rng_state(self, device="cuda"):
        return self._gen.get_state()

    def set_rng_state(self, new_state, device="cuda") -> None:
        self._gen.set_state(new_state)

    def get_rng_state_all(self):
        return [self._gen.get_state()]

    def set_rng_state_all(self, new_states) -> None:
        for state in new_states[:1]:
            self._gen.set_state(state)

    def manual_seed(self, seed) -> None:
        self._gen.manual_seed(int(seed))

    manual_seed_all = manual_seed

    def seed(self) -> None:
        self._gen.seed()

    seed_all = seed

    def initial_seed(self) -> int:
        return self._gen.initial_seed()

    # ---- what sim refuses, records nothing of, or runs its own way -----------------------------
    def _lazy_init(self) -> None:
        """Reached by a torch.cuda function the table does not answer, or by C++ making a tensor
        on the real CUDA device past the placement mode (which a CPU-only build cannot)."""
        caller = sys._getframe(1)
        if caller.f_code.co_filename.startswith(_TORCH_CUDA_DIR):
            raise self.log.refuse(f"torch.cuda.{caller.f_code.co_name}", "a CUDA runtime call "
                                  "that sim does not model")
        raise self.log.refuse("a tensor made on the real CUDA device", "it bypassed sim's "
                              "placement of cuda tensors")

    def _record_memory_history(self, *args, **kwargs) -> None:
        self.log.note("history", "torch.cuda.memory._record_memory_history: the script's own "
                                 "recording is not made in sim (memlab profile --snapshot FILE "
                                 "writes sim's)")

    def _dump_snapshot(self, filename="dump_snapshot.pickle") -> None:
        self.log.note("dump", f"torch.cuda.memory._dump_snapshot({filename!r}) at "
                              f"{self.log.site(2)}: not written in sim (--snapshot FILE writes "
                              "sim's)")

    def nvtx_range_push(self, msg) -> int:
        return 0

    def nvtx_range_pop(self) -> int:
        return 0

    def nvtx_mark(self, msg) -> None:
        pass

    @contextmanager
    def nvtx_range(self, msg, *args, **kwargs):
        yield

    def module_apply(self, module, fn, recurse=True):
        """On the GPU `model.cuda()` changes each parameter in place (`param.data = ...`), so a
        parameter two modules share (GPT-2's tied embedding and head) stays one. A host
        parameter cannot take a fake tensor as its data, so Module._apply makes a new Parameter
        per module; here each host tensor is copied once per move and the modules that shared a
        parameter share its copy again."""
        original, placement = self._orig["module_apply"], self.facade.placement
        if placement is None or placement.moves is not None:  # a child's, inside the move
            return original(module, fn, recurse)
        before = [(m, key, p) for m in module.modules() for key, p in m._parameters.items()
                  if p is not None]
        placement.moves = {}
        try:
            out = original(module, fn, recurse)
        finally:
            placement.moves = None
        first: dict[int, object] = {}
        for m, key, p in before:
            now = m._parameters.get(key)
            if id(p) in first and now is not first[id(p)]:
                m._parameters[key] = first[id(p)]
            else:
                first.setdefault(id(p), now)
        return out

    def save(self, obj, f, *args, **kwargs) -> None:
        """Nothing is written (fake tensors have no values); what was saved is kept, as shapes,
        so that the script's own torch.load of that file gets it back (pytorch/examples'
        word_language_model saves its best model and loads it for the test pass)."""
        where = f if isinstance(f, str) else getattr(f, "name", "a file object")
        self.saved[_file_key(f)] = _Kept(obj)
        self.log.note(f"save {self.log.site(2)}", f"torch.save({where!r}) at {self.log.site(2)}: "
                      "not written (sim's tensors have no values); a torch.load of it gets "
                      "tensors of the same shapes")

    def load(self, f, map_location=None, *args, **kwargs):
        """What torch.save kept, made again (new tensors, as loading makes them); a real file
        (a checkpoint on disk) is loaded on the host, its tensors copied to the GPU when
        `map_location` names cuda (a checkpoint saved on a GPU loads there by default: the CPU
        build would fail, so sim asks for `map_location="cuda"` to put it on the GPU)."""
        kept = self.saved.get(_file_key(f))
        if kept is not None:
            self.log.note(f"load {self.log.site(2)}", f"torch.load at {self.log.site(2)}: what "
                          "the script's torch.save kept (sim wrote no file), made again")
            return kept.make(on_host=_host_location(map_location))
        to_gpu = _is_cuda_location(map_location)
        obj = self._orig["load"](f, *args, map_location="cpu" if to_gpu else map_location,
                                 **kwargs)
        if not to_gpu:
            return obj
        leaves, spec = torch_compat.tree_flatten(obj)
        return torch_compat.tree_unflatten(
            [x.to("cuda") if isinstance(x, torch.Tensor) else x for x in leaves], spec)

    def dataloader_iterator(self, loader):
        original = self._orig["dataloader_iterator"]
        if loader.num_workers == 0:
            return original(loader)
        in_process = torch_compat.single_process_dataloader_iter()

        self.log.note("dataloader", f"DataLoader(num_workers={loader.num_workers}) at "
                      f"{self.log.site(2)}: its workers run in this process (a worker process "
                      "would not see sim's fake tensors); batches and their bytes are the "
                      "same, worker_init_fn is not called")
        workers, timeout = loader.num_workers, loader.timeout
        loader.num_workers, loader.timeout = 0, 0
        try:
            return in_process(loader)
        finally:
            loader.num_workers, loader.timeout = workers, timeout

    def scaler_step(self, scaler, optimizer, optimizer_state, *args, **kwargs):
        found = optimizer_state["found_inf_per_device"].values()
        if not any(isinstance(v, FakeTensor) for v in found):
            return self._orig["scaler_step"](scaler, optimizer, optimizer_state, *args, **kwargs)
        self.log.note("scaler", "GradScaler: sim assumes no inf/NaN gradients, so every "
                                "optimizer step is taken (the GPU skips a step whose gradients "
                                "overflowed)")
        return optimizer.step(*args, **kwargs)

    def fake_tolist(self, t):
        from .script_values import stand_in_list

        self.log.value_read(".tolist()")
        return stand_in_list(tuple(t.shape), t.dtype)

    @property
    def fake_device(self):
        return device_reads_of_fake(self.log)

    # ---- autocast: "cuda" is CPU autocast, which SimPolicy makes take CUDA's op lists ----------
    def autocast_init(self, ac, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "cuda":
            if dtype is None:  # CUDA's default, not the CPU's (float16, not bfloat16)
                dtype = self._orig["autocast_get_autocast_dtype"]("cuda")
            device_type = "cpu"
        self._orig["autocast_init"](ac, device_type, dtype=dtype, enabled=enabled,
                                    cache_enabled=cache_enabled)

    def autocast_is_autocast_enabled(self, device_type=None):
        return self._orig["autocast_is_autocast_enabled"](_autocast_device(device_type))

    def autocast_get_autocast_dtype(self, device_type):
        return self._orig["autocast_get_autocast_dtype"](_autocast_device(device_type))

    def autocast_set_autocast_enabled(self, *args):
        if len(args) == 1:  # legacy set_autocast_enabled(enabled): CUDA's
            args = ("cuda", args[0])
        return self._orig["autocast_set_autocast_enabled"](_autocast_device(args[0]), args[1])

    def autocast_set_autocast_dtype(self, device_type, dtype):
        return self._orig["autocast_set_autocast_dtype"](_autocast_device(device_type), dtype)

    def autocast_get_autocast_gpu_dtype(self):
        return self._orig["autocast_get_autocast_dtype"]("cpu")

    def autocast_set_autocast_gpu_dtype(self, dtype):
        return self._orig["autocast_set_autocast_dtype"]("cpu", dtype)

    def autocast_is_autocast_available(self, device_type):
        return self._orig["autocast_is_autocast_available"](_autocast_device(device_type))


_TORCH_CUDA_DIR = os.path.dirname(torch.cuda.__file__)


def _file_key(f):
    """A file torch.save / torch.load is given: its absolute path, or the object itself."""
    if isinstance(f, (str, os.PathLike)):
        return os.path.abspath(os.fspath(f))
    name = getattr(f, "name", None)
    return os.path.abspath(name) if isinstance(name, str) else id(f)


def _is_cuda_location(map_location) -> bool:
    return _is_cuda_device(map_location)


def _host_location(map_location) -> bool:
    return (isinstance(map_location, str) and map_location.startswith("cpu")) or (
        isinstance(map_location, torch.device) and map_location.type == "cpu")


class _Kept:
    """What torch.save was given, without keeping its tensors alive: a module itself (it lives
    on in the script anyway), else the structure with each GPU tensor's shape, strides, dtype."""

    def __init__(self, obj):
        import copy

        self._copy = copy.deepcopy
        if isinstance(obj, torch.nn.Module):
            self.module, self.spec, self.leaves = obj, None, None
            return
        self.module = None
        leaves, self.spec = torch_compat.tree_flatten(obj)
        self.leaves = [("fake", tuple(x.shape), x.stride(), x.dtype) if isinstance(x, FakeTensor)
                       else x for x in leaves]

    def make(self, on_host: bool = False):
        if self.module is not None:
            return self._copy(self.module)  # new parameters, as a loaded model has
        device = "cpu" if on_host else "cuda"
        leaves = [torch.empty_strided(x[1], x[2], dtype=x[3], device=device)
                  if isinstance(x, tuple) and len(x) == 4 and x[0] == "fake" else x
                  for x in self.leaves]
        return torch_compat.tree_unflatten(leaves, self.spec)


def _is_cuda_device(device) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and device.startswith("cuda")


_METHODS = {"autocast_init", "scaler_step", "dataloader_iterator",
            "fake_tolist", "module_apply", "record_stream"}  # on a class


class CudaFacade:
    """The facade (module docstring). `allocator`: the Replay the tracker feeds; `gpu`: the
    card; `policy`: sim's SimPolicy (stand-in values and a plain run while the facade is on);
    `script_dir`: whose lines are the script's own (device branches are named there)."""

    def __init__(self, allocator: Replay, gpu: Gpu, policy=None, script_dir: str | None = None):
        self.allocator, self.gpu, self.policy = allocator, gpu, policy
        self.log = ScriptLog(script_dir)
        self.memory = MemoryApi(allocator, gpu.total_bytes)
        self.placement: DevicePlacement | None = None
        self.runtime = CudaRuntime(self)
        self._saved: list[tuple[object, str, bool, object]] = []
        self._stack: ExitStack | None = None

    def _answer(self, row: Intercept):
        value = attrgetter(row.impl or row.name)(self.runtime)
        if (row.impl or row.name) in _METHODS:  # a method of a class: `self` comes first
            bound = value

            def method(obj, *args, **kwargs):
                return bound(obj, *args, **kwargs)

            method.__name__ = row.name
            return method
        return value

    def __enter__(self) -> "CudaFacade":
        if self._stack is not None:
            raise RuntimeError("the CUDA facade is already on")
        stack = self._stack = ExitStack()
        try:
            stack.callback(_restore_default_device, torch_compat.default_device())
            stack.callback(self._restore)  # before the first patch: a failed install undoes
            for row in INTERCEPTED:
                owner = _owner(row.owner)
                if not hasattr(owner, row.name):
                    continue  # not in this torch version
                self.runtime._orig[row.impl or row.name] = getattr(owner, row.name)
                had = row.name in vars(owner)
                self._saved.append((owner, row.name, had, vars(owner).get(row.name)))
                setattr(owner, row.name, self._answer(row))
            stack.enter_context(warnings.catch_warnings())
            # a CPU-only build has no pinned memory: the DataLoader's batches stay in host memory,
            # which is what pinning them changes (the GPU's copy is the same)
            warnings.filterwarnings("ignore", message=".*pin_memory.*no accelerator is found")
            if self.policy is not None:
                stack.enter_context(self.policy.stand_in_values())
                stack.enter_context(self.policy.plain_run())
            self.placement = stack.enter_context(DevicePlacement(self.log))
            stack.callback(setattr, self, "placement", None)
        except BaseException:
            self._stack = None
            stack.close()
            raise
        return self

    def _restore(self) -> None:
        for owner, name, had, value in reversed(self._saved):
            if had:
                setattr(owner, name, value)
            else:
                delattr(owner, name)
        self._saved.clear()

    def __exit__(self, *exc) -> bool:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
        return False


def _restore_default_device(device) -> None:
    """The script may have called torch.set_default_device("cuda"): the default goes back.
    CURRENT_DEVICE is set as well: torch.utils.checkpoint's recomputation re-enters the global
    DeviceContext, which then remembers "cuda" as the device to restore (torch 2.13)."""
    if torch_compat.default_device() != device:
        torch.set_default_device(device)
        torch_compat.set_default_device_marker(device)


__all__ = ["CudaFacade", "INTERCEPTED", "Intercept", "docs_table", "owners"]
