"""The CUDA facade: a CUDA training script, unmodified, runs in sim as if on the chosen GPU.

    with CudaFacade(allocator, gpu("h200"), policy=policy, script_dir=folder) as facade:
        runpy.run_path("train.py", run_name="__main__")
    facade.log.render()     # what the result must say (values read, writes skipped, ...)

ONE context manager, installed and restored as a unit, over sim's FakeTensorMode, CUDA paths and
tensor tracker (the sim backend enters those, lab.measure.backends.sim):

- where tensors live: a TorchFunctionMode (lab.measure.sim.facade.placement) rewrites `cuda`
  to fake CPU tensors and keeps host tensors real (a mode reaches factories, `torch.device`
  arguments, `torch.set_default_device("cuda")`'s DeviceContext, `Tensor.cuda/.to/.pin_memory`,
  `Module.cuda/.to` through them, numpy data via `torch.from_numpy`), except a model's weights
  built on the host, which are placeholders without values (lab.measure.sim.facade.placeholders);
- what a mode cannot reach is patched from the table `INTERCEPTED` below (each row: where,
  what, what sim answers; docs/SIMULATION.md renders it): `torch.cuda`'s runtime (a GPU is
  there: the chosen card's row of lab.measure.sim.gpus), its memory API (answered by the
  allocator model: lab.measure.sim.facade.memory_api), CUDA autocast (routed to CPU autocast,
  which CudaPaths' CudaAutocast makes take CUDA's op lists), GradScaler's step, CUDA
  generators, `torch.save` (not written), DataLoader workers (in this process);
  `torch.compile` is lab/profile/compiled.py's in every mode (in sim: eager, said first);
  (the answers: lab.measure.sim.facade.runtime for torch.cuda, .calls for the libraries);
- values: stand-ins, and the sites that read them (lab.measure.sim.facade.script_values); with the
  policy given, CudaPaths stands for a run without memlab's tracker (`plain_run`): the truth a
  user's script is judged by is its own max_memory_allocated.

Anything `torch.cuda` does that is not in the table reaches `torch.cuda._lazy_init`, which
here refuses in one line: "not supported in sim: torch.cuda.X at train.py:N".
"""

from __future__ import annotations

import importlib
import warnings
from contextlib import ExitStack
from dataclasses import dataclass
from operator import attrgetter

import torch

from ... import torch_compat
from ..allocator.replay import Replay
from ..gpus import Gpu
from ..kernels.streams import SimStreams
from .memory_api import MemoryApi
from .placeholders import HostPlaceholders
from .placement import DevicePlacement
from .runtime import CudaRuntime
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
           "set_device ipc_collect",
           "one GPU, device 0, initialised"),
    Intercept("torch.cuda", "synchronize", "a synchronisation point of every stream: blocks "
              "waiting for streams' events come back (the allocator model)"),
    *_rows("torch.cuda", "get_device_name get_device_capability get_device_properties "
           "is_bf16_supported is_tf32_supported",
           "the chosen card's row (lab/measure/sim/gpus.py)"),
    *_rows("torch.cuda", "Stream Event current_stream default_stream stream set_stream device "
           "device_of is_current_stream_capturing",
           "streams (torch.cpu's, which the allocator model keeps apart; their and their "
           "events' synchronize are its synchronisation points) and events (timing this CPU); "
           "device contexts do nothing"),
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
    Intercept("torch.Tensor", "record_stream", "the allocator model: the freed block waits for "
              "the stream's next synchronisation point", "record_stream"),
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
    Intercept("torch.autograd.graph.saved_tensors_hooks", "__init__", "the pack and unpack "
              "hooks run under the placement mode (autograd calls them inside an op, where no "
              "mode is on)", "saved_hooks_init"),
    Intercept("torch", "save", "nothing written, noted; the file's contents kept as shapes"),
    Intercept("torch", "load", "what the script's torch.save kept, made again; a real file on "
              "the host, its tensors moved to the GPU when map_location is cuda"),
    Intercept("torch.utils.data.DataLoader", "_get_iterator",
              "workers run in this process", "dataloader_iterator"),
    Intercept("torch._subclasses.fake_tensor.FakeTensor", "device",
              "cuda:0 to the script and its libraries (their device branches go the GPU's way; "
              "the script's are noted), the CPU to torch's own code", "fake_device"),
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


_METHODS = {"autocast_init", "scaler_step", "dataloader_iterator",
            "fake_tolist", "module_apply", "record_stream", "saved_hooks_init"}  # on a class


class CudaFacade:
    """The facade (module docstring). `allocator`: the Replay the tracker feeds; `gpu`: the
    card; `policy`: sim's SimPolicy (stand-in values and a plain run while the facade is on);
    `script_dir`: whose lines are the script's own (device branches are named there)."""

    def __init__(self, allocator: Replay, gpu: Gpu, policy=None, script_dir: str | None = None,
                 streams: SimStreams | None = None):
        self.allocator, self.gpu, self.policy = allocator, gpu, policy
        # stream uses and waits (the sim backend's, which knows the tracker's keys)
        self.streams = streams if streams is not None else SimStreams(allocator)
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
            # at the end, what each part answered its own way, one note each (if any)
            stack.callback(self._note_from, "routing", self.placement.routing.note)
            stack.callback(setattr, self, "placement", None)
            placeholders = stack.enter_context(HostPlaceholders())
            stack.callback(self._note_from, "placeholders", placeholders.note)
        except BaseException:
            self._stack = None
            stack.close()
            raise
        return self

    def _note_from(self, key: str, note) -> None:
        text = note()
        if text:
            self.log.note(key, text)

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
