"""What the CUDA facade answers for calls a CUDA script makes into torch's libraries (not the
torch.cuda runtime: lab.measure.sim.facade.runtime): CUDA autocast as CPU autocast, GradScaler's
step, a model moved to the GPU, torch.save / torch.load, DataLoader workers, and what a fake
tensor says of its device and values. A mixin of `CudaRuntime`, which has `log`, `facade`,
`saved` and `_orig` (the originals the table's answers wrap, filled by CudaFacade)."""

from __future__ import annotations

import os

import torch

from ... import torch_compat
from ...torch_compat import FakeTensor
from .placement import device_reads_of_fake


def _autocast_device(device_type):
    return "cpu" if device_type is None or device_type == "cuda" else device_type


class ScriptCalls:
    def record_stream(self, tensor, stream) -> None:
        """The tensor's block waits, once freed, for `stream`'s next synchronisation point
        (lab.measure.sim.kernels.streams states the model's rule)."""
        streams = self.facade.streams
        streams.record_stream(tensor, self._handle(stream))
        site = self.log.site(2)
        self.log.note("record_stream", f"record_stream at {site}: a block used on a side stream "
                      "is reused after that stream's next synchronisation point in sim (the "
                      "allocator model's rule: the GPU is taken to lag the host until then), so "
                      "reserved memory is the most the GPU can reserve there")

    def saved_hooks_init(self, hooks, pack_hook, unpack_hook):
        """A script's saved_tensors_hooks (its own offload hooks, save_on_cpu) are called inside
        autograd's ops, where no TorchFunctionMode is on: each hook runs under the placement
        again, so that its `.to("cuda")` or `pin_memory=True` lands where the script's lines do."""
        original, placement = self._orig["saved_hooks_init"], self.facade.placement
        if placement is None:
            return original(hooks, pack_hook, unpack_hook)

        def placed(fn):
            def hook(x):
                with placement:
                    return fn(x)

            return hook

        return original(hooks, placed(pack_hook), placed(unpack_hook))

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


__all__ = ["ScriptCalls"]
