"""The torch.cuda runtime (and torch.accelerator) as the CUDA facade answers it in sim: one GPU,
the chosen card's row of lab.measure.sim.gpus; streams that are torch.cpu's (the allocator
model keeps the blocks of each apart, as the caching allocator does); events that time this
CPU; one host generator for the GPU's random state; CUDA graphs refused. `CudaRuntime` is what
the table of lab.measure.sim.facade.cuda_facade names (`Intercept.impl`); what it answers for
torch's libraries is its mixin, lab.measure.sim.facade.calls. It reads the facade through
`FacadeParts` (the facade imports this module, not the other way round)."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Protocol

import torch

from ... import torch_compat
from ..gpus import Gpu
from ..kernels.streams import SimStreams
from .calls import ScriptCalls
from .memory_api import MemoryApi
from .placement import DevicePlacement
from .script_values import ScriptLog


class FacadeParts(Protocol):
    """What the runtime reads of the CUDA facade (lab.measure.sim.facade.cuda_facade)."""

    gpu: Gpu
    memory: MemoryApi  # torch.cuda's memory API, answered by the allocator model
    log: ScriptLog  # what the result must say
    placement: DevicePlacement | None  # where tensors land, while the facade is on
    streams: SimStreams  # stream uses and waits, to the allocator model


class _DeviceProperties:
    """What torch.cuda.get_device_properties() returns, from a row of lab.measure.sim.gpus."""

    def __init__(self, g: Gpu):
        self.name = g.device_name
        self.major, self.minor = g.capability
        self.total_memory = g.total_bytes
        self.multi_processor_count = g.sms
        self.is_integrated = self.is_multi_gpu_board = 0
        self.warp_size = 32
        self.max_threads_per_multi_processor = g.max_threads_per_sm

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


class CudaRuntime(ScriptCalls):
    """The answers the table's rows name (`Intercept.impl`)."""

    def __init__(self, facade: FacadeParts):
        self.facade = facade
        self.gpu = facade.gpu
        self.memory = facade.memory
        log = self.log = facade.log
        runtime = self

        import torch.cpu as cpu

        self._cpu = cpu

        streams = facade.streams

        class Stream(cpu.Stream):
            """A CUDA stream in sim: a torch.cpu stream (the allocator model numbers the
            stream code selects, lab.measure.sim.dispatch.policy). Its waits are the model's
            synchronisation points (lab.measure.sim.kernels.streams)."""

            def __init__(self, device=None, priority: int = 0, **kwargs):
                super().__init__(priority)
                self.priority, self.cuda_stream = priority, id(self)
                self.device = torch.device("cuda", 0)

            def query(self) -> bool:
                streams.synchronize(runtime._handle(self))
                return True

            def synchronize(self) -> None:
                streams.synchronize(runtime._handle(self))

            def is_capturing(self) -> bool:  # no CUDA graph is ever captured in sim
                return False

            def record_event(self, event=None):
                event = event or runtime.Event()
                event.record(self)
                return event

            def wait_stream(self, stream) -> None:  # a GPU-side wait (kernels.streams)
                streams.wait(runtime._handle(self), runtime._handle(stream))

            def wait_event(self, event) -> None:
                event.wait(self)

            def __eq__(self, other):
                return self is other

            __hash__ = object.__hash__

        class Event(streams.event_class()):
            """A CUDA event in sim: `synchronize()` / `query()` complete the events of its
            stream up to it in the allocator model; `elapsed_time` is the wall time of the
            simulation on this CPU between the two records, not the GPU's (sim has no timing)."""

            def __init__(self, enable_timing: bool = False, blocking: bool = False,
                         interprocess: bool = False, **kwargs):
                super().__init__()
                self.t = None

            def record(self, stream=None) -> None:
                super().record(runtime._handle(stream or runtime.current_stream()))
                self.t = time.perf_counter()
                log.note("events", "CUDA events time this CPU running the simulation, not the "
                                   "GPU (sim predicts memory, not time)")

            def wait(self, stream=None) -> None:
                super().wait(runtime._handle(stream or runtime.current_stream()))

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
        self.facade.streams.synchronize()

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

    def refuse_graphs(self, *args, **kwargs):
        raise self.log.refuse("CUDA graphs (torch.cuda.CUDAGraph, graph, make_graphed_callables)",
                              "a graph replays captured kernels, which sim never runs")

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
        self.facade.streams.synchronize()

    def accelerator_current_stream(self, device=None):
        return self.current_stream(device)

    def accelerator_set_stream(self, stream) -> None:
        self.set_stream(stream)

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


_TORCH_CUDA_DIR = os.path.dirname(torch.cuda.__file__)


def _is_cuda_device(device) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and device.startswith("cuda")


__all__ = ["CudaRuntime"]
