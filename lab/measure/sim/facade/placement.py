"""Where a CUDA script's tensors land in sim: the GPU's are fake CPU tensors, the host's real.

Sim runs a script under FakeTensorMode on the CPU device (fake CUDA tensors abort a CPU build in
backward and autocast). A script written for a GPU names `cuda` (`device="cuda"`, `.cuda()`,
`.to(device)`, `torch.set_default_device("cuda")`); this TorchFunctionMode sees every call into
torch from Python (factories, tensor methods, `nn.functional`) and decides where its result lives:

  on the GPU (a fake tensor, counted by the tracker and the allocator model):
      a `cuda` device argument (rewritten to the CPU), a factory while the default device is
      `cuda`, any call with a fake tensor among its arguments, a `torch.device` object as the
      device (`device=x.device` of a GPU tensor reads `cpu` in sim, so it must mean the GPU),
      `.cuda()` / `.to("cuda")` of a host tensor (a new fake copy, as the GPU makes one);
  on the host (a real tensor, run with the dispatch modes off; what the GPU never holds):
      a factory without a device while the default is the CPU (a model built before
      `.to(device)`, `torch.zeros(eval_iters)`, a tokenised dataset), `device="cpu"` given as a
      string, any call whose tensors are all real (collating a batch, numpy data via
      `torch.from_numpy`), `.pin_memory()` (pinned memory is host memory);
  from the GPU to the host: `.cpu()`, `.numpy()`, `.to("cpu")` of a fake tensor make a real one
      of stand-in values (ones), and the site is named.

The script and its libraries read `x.device` and `x.is_cuda` of a GPU tensor as the GPU would
answer (`cuda:0`, True), so their branches on the device go the GPU's way and `model.device`
names the GPU; torch's own code and sim read the CPU device the fake tensor has (its kernels,
autocast and autograd run there, and torch's branches on the device take their CPU side). The
result names the script's own lines that branched.

Values of fake tensors (`.item()`, `.tolist()`, `float(t)`, `bool(t)`, `f"{t:.4f}"`, `print(t)`)
answer stand-ins and the site is logged (lab.measure.sim.facade.script_values); an op whose output
shape depends on values (`nonzero`, `masked_select`, `unique`, boolean-mask indexing) is refused
in one line with its site, unless it reads a one_hot routing mask (balanced routing:
lab.measure.sim.facade.routing). A model's weights built on the host are placeholders without
values (lab.measure.sim.facade.placeholders): host ops on them run on meta. One ambiguity is resolved by rule, not seen: a `torch.device("cpu")`
*object* counts as the GPU (it is what `x.device` of a GPU tensor reads in sim); only the string
"cpu" means the host.
"""

from __future__ import annotations

import sys

import torch
from torch.overrides import TorchFunctionMode

from ... import torch_compat
from ...torch_compat import FakeTensor
from .placeholders import placeholder
from .routing import WATCHED, RoutingDensity
from .script_values import ScriptLog, stand_in, stand_in_list

_CPU = torch.device("cpu")
_META = torch.device("meta")
_CUDA0 = torch.device("cuda", 0)
_T = torch.Tensor
# a host stand-in larger than this (elements) is one value broadcast, not real memory
_HOST_STAND_IN_MAX = 1 << 24
_disable_current_modes = torch_compat.disable_current_modes
DataDependentOutputException, DynamicOutputShapeException = torch_compat.fake_exceptions()
# the factories torch.set_default_device's DeviceContext gives a device, and the _like ones
_FACTORIES = torch_compat.device_constructors() | {
    torch.empty_like, torch.zeros_like, torch.ones_like, torch.full_like, torch.rand_like,
    torch.randn_like, torch.randint_like}


def _is_cuda(dev) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    if isinstance(dev, str):
        return dev.startswith("cuda")
    return isinstance(dev, int) and not isinstance(dev, bool)  # .to(0), .cuda(0): cuda:0


def _host_string(dev) -> bool:
    return isinstance(dev, str) and dev.startswith("cpu")


REAL, VALUELESS, FAKE = 1, 2, 3  # what _scan finds, the highest kind found (0: no tensor)


def _kind(t) -> int:
    if isinstance(t, FakeTensor):
        return FAKE
    return VALUELESS if t.is_meta else REAL


def _scan(x, depth: int = 0) -> int:
    """FAKE: a fake tensor inside `x`; VALUELESS: a host placeholder (a meta tensor,
    lab.measure.sim.facade.placeholders) and no fake one; REAL: only real tensors; 0: no tensor
    (lists, tuples, dicts, slices looked into, two levels deep)."""
    if isinstance(x, torch.Tensor):
        return _kind(x)
    if depth > 2:
        return 0
    if isinstance(x, (list, tuple)):
        items = x
    elif isinstance(x, dict):
        items = x.values()
    elif isinstance(x, slice):
        items = (x.start, x.stop, x.step)
    else:
        return 0
    found = 0
    for item in items:
        k = _scan(item, depth + 1)
        if k == FAKE:
            return FAKE
        found = max(found, k)
    return found


def _tensors(args, kwargs) -> int:
    found = 0
    for a in args:
        k = _scan(a)
        if k == FAKE:
            return FAKE
        found = max(found, k)
    for a in kwargs.values():
        k = _scan(a)
        if k == FAKE:
            return FAKE
        found = max(found, k)
    return found


def _as_meta(x):
    """Real tensors in `x` (an op's arguments) as placeholders of themselves."""
    if isinstance(x, torch.Tensor):
        return x if x.is_meta or isinstance(x, FakeTensor) else placeholder(x)
    if type(x) in (list, tuple):
        return type(x)(_as_meta(i) for i in x)
    if type(x) is dict:
        return {k: _as_meta(v) for k, v in x.items()}
    return x


def _writes(func) -> bool:
    """An in-place op (`add_`, `t[i] = v`, `+=`): its first argument is what it writes."""
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.startswith("__")) or func is _T.__setitem__ or (
        name.startswith("__i") and name.endswith("__") and name not in ("__index__", "__int__",
                                                                         "__invert__", "__iter__"))


def op_name(func) -> str:
    q = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
    for prefix, shown in (("_VariableFunctionsClass.", "torch."), ("TensorBase.", "Tensor."),
                          ("_TensorBase.", "Tensor.")):
        if q.startswith(prefix):
            return shown + q[len(prefix):]
    mod = getattr(func, "__module__", "") or ""
    if mod.startswith("torch") and "." not in q:
        return f"{mod.replace('torch._C._nn', 'torch.nn.functional')}.{q}"
    return q


def host_stand_in(t: torch.Tensor, dtype=None) -> torch.Tensor:
    """A real host tensor of `t`'s shape holding stand-in values (ones)."""
    dtype = dtype or t.dtype
    with _disable_current_modes():  # device=: a default device "cuda" would still apply
        if t.numel() <= _HOST_STAND_IN_MAX:
            return torch.ones(tuple(t.shape), dtype=dtype, device=_CPU)
        return torch.ones((), dtype=dtype, device=_CPU).expand(tuple(t.shape))


def _device_arg(args: tuple, kwargs: dict):
    """The device a `.to(...)` names (a str, torch.device, int or tensor), and where it is:
    ("kw", None) | ("pos", index) | (None, None)."""
    if "device" in kwargs:
        return kwargs["device"], ("kw", None)
    if "other" in kwargs:
        return kwargs["other"], ("kw-other", None)
    for i, a in enumerate(args):
        if isinstance(a, (str, torch.device, torch.Tensor)) or (
                isinstance(a, int) and not isinstance(a, bool)):
            return a, ("pos", i)
        if isinstance(a, torch.dtype):
            return None, (None, None)
    return None, (None, None)


class DevicePlacement(TorchFunctionMode):
    """The mode (see the module docstring). `log` collects what the result must say."""

    def __init__(self, log: ScriptLog):
        super().__init__()
        self.log = log
        # while a module moves (Module._apply, see CudaRuntime.module_apply): host tensor id ->
        # (it, its GPU copy), so a tensor two modules share (tied weights) is copied once
        self.moves: dict[int, tuple] | None = None
        self.routing = RoutingDensity()  # one_hot masks: balanced routing
        self._special = {
            _T.to: self._to, _T.cuda: self._cuda, _T.cpu: self._cpu,
            _T.pin_memory: self._pin_memory, _T.numpy: self._numpy, _T.copy_: self._copy,
            _T.item: self._value, _T.tolist: self._value, _T.__bool__: self._value,
            _T.__float__: self._value, _T.__int__: self._value, _T.__index__: self._value,
            _T.__complex__: self._value, _T.__format__: self._format, _T.__repr__: self._repr,
            _T.__getitem__: self._getitem,
            _T.is_cuda.__get__: self._is_cuda_read, _T.device.__get__: self._device_read,
        }

    # ---- the rule ------------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        special = self._special.get(func)
        if special is not None:
            return special(func, args, kwargs)
        return self._placed(func, args, kwargs)

    def _placed(self, func, args, kwargs):
        if kwargs.get("pin_memory"):  # torch.empty(..., pin_memory=True): host memory, which a
            kwargs = {**kwargs, "pin_memory": False}  # CPU-only build cannot pin (as .pin_memory())
        dev = kwargs.get("device")
        if dev is not None:
            if _is_cuda(dev):
                return self._on_device(func, args, {**kwargs, "device": _CPU})
            if _host_string(dev):
                seen = _tensors(args, kwargs)
                if seen == VALUELESS:
                    return self._valueless(func, args, kwargs)
                if seen != FAKE:
                    return self._on_host(func, args, kwargs)
            return self._on_device(func, args, kwargs)
        seen = _tensors(args, kwargs)
        if seen == FAKE:
            return self._on_device(func, args, kwargs)
        if seen == VALUELESS:
            return self._valueless(func, args, kwargs)
        if seen == 0:  # a factory: where the default device is
            current = torch_compat.default_device()
            if current is not None and current.type == "cuda":
                if func in _FACTORIES:
                    kwargs = {**kwargs, "device": _CPU}
                return self._on_device(func, args, kwargs)
        return self._on_host(func, args, kwargs)

    def _on_device(self, func, args, kwargs):
        try:
            out = func(*args, **kwargs)
        except DynamicOutputShapeException:
            balanced = self.routing.answer(func, args, kwargs, self.log.site)
            if balanced is not None:  # a one_hot routing mask (lab.measure.sim.facade.routing)
                return balanced
            raise self.log.refuse(self._what(func, args), "its output's shape depends on tensor "
                                  "values, which sim does not have", self.log.site(3)) from None
        except DataDependentOutputException:
            raise self.log.refuse(self._what(func, args), "it reads tensor values, which sim "
                                  "does not have", self.log.site(3)) from None
        if func in WATCHED:
            self.routing.after(func, args, kwargs, out)
        return out

    @staticmethod
    def _what(func, args) -> str:
        if func is _T.__getitem__ or func is _T.__setitem__:
            return "indexing with a boolean mask (t[mask])"
        return op_name(func)

    @staticmethod
    def _on_host(func, args, kwargs):
        with _disable_current_modes():
            return func(*args, **kwargs)

    def _valueless(self, func, args, kwargs):
        """A host op with a placeholder among its tensors (lab.measure.sim.facade.placeholders):
        run on meta, the real tensors beside it taken as meta too, so shapes are checked and the
        result is a placeholder. A real tensor the op writes into keeps its values. An op that
        needs values (a boolean mask, nonzero) is refused in one line."""
        writes_real = bool(args) and isinstance(args[0], torch.Tensor) and not args[0].is_meta \
            and _writes(func)
        margs, mkwargs = _as_meta(args), _as_meta(kwargs)
        if "device" in mkwargs:
            mkwargs["device"] = _META
        with _disable_current_modes():
            try:
                out = func(*margs, **mkwargs)
            except NotImplementedError:
                raise self.log.refuse(
                    self._what(func, args), "it needs the values of a host tensor sim made "
                    "without values: the weights of a model built on the host are placeholders",
                    self.log.site(3)) from None
        return args[0] if writes_real else out

    # ---- moves ---------------------------------------------------------------------------------
    def _to(self, func, args, kwargs):
        t, rest = args[0], args[1:]
        fake = isinstance(t, FakeTensor)
        dev, (where, i) = _device_arg(rest, kwargs)
        if t.is_meta and not fake and not _is_cuda(dev) and not isinstance(dev, FakeTensor):
            # a placeholder stays one on the host: a dtype change at most
            return self._valueless(func, args, kwargs if where != "kw" else {
                k: v for k, v in kwargs.items() if k != "device"})
        if isinstance(dev, torch.Tensor):  # .to(other): its device (and dtype)
            if isinstance(dev, FakeTensor) == fake:
                return self._on_device(func, args, kwargs) if fake else self._on_host(func, args,
                                                                                   kwargs)
            if fake:
                self.log.host_copy()
                return host_stand_in(t, dev.dtype)
            return t.to(_CPU, dev.dtype, copy=True)  # a host tensor to the GPU: a new fake
        if _is_cuda(dev):
            if where == "kw":
                kwargs = {**kwargs, "device": _CPU}
            else:
                rest = rest[:i] + (_CPU,) + rest[i + 1:]
            if fake:  # already there: a dtype change at most
                return self._on_device(func, (t, *rest), kwargs)
            # a host tensor to the GPU: a copy the tracker counts (copy=True: the CPU device is
            # where `t` already is, so `.to` would hand `t` itself back)
            return self._moved(t, lambda: func(t, *rest, **{**kwargs, "copy": True}))
        if _host_string(dev) and fake:
            self.log.host_copy()
            dtype = next((a for a in (*rest, kwargs.get("dtype")) if isinstance(a, torch.dtype)),
                         None)
            return host_stand_in(t, dtype)
        return self._on_device(func, args, kwargs) if fake else self._on_host(func, args, kwargs)

    def _cuda(self, func, args, kwargs):
        t = args[0]
        if isinstance(t, FakeTensor):
            return t
        return self._moved(t, lambda: _T.to(t, _CPU, copy=True,
                                            non_blocking=bool(kwargs.get("non_blocking", False))))

    def _moved(self, t, copy):
        if self.moves is None:
            return copy()
        hit = self.moves.get(id(t))
        if hit is None or hit[0] is not t:
            hit = self.moves[id(t)] = (t, copy())
        return hit[1]

    def _cpu(self, func, args, kwargs):
        t = args[0]
        if isinstance(t, FakeTensor):
            self.log.host_copy()
            return host_stand_in(t)
        if t.is_meta:  # a placeholder is on the host already
            return t
        return self._on_host(func, args, kwargs)

    def _copy(self, func, args, kwargs):
        dst, src = args[0], args[1] if len(args) > 1 else kwargs.get("src")
        if isinstance(src, FakeTensor) and not isinstance(dst, FakeTensor):
            # GPU -> host into the script's own buffer (an offload): the GPU allocates nothing;
            # sim has no values to write
            self.log.host_copy()
            return dst
        return self._placed(func, args, kwargs)

    @staticmethod
    def _pin_memory(func, args, kwargs):
        # pinned memory is host memory, and a CPU-only build has none to pin
        return args[0]

    def _numpy(self, func, args, kwargs):
        t = args[0]
        if isinstance(t, FakeTensor):
            self.log.host_copy()
            return host_stand_in(t.detach()).numpy()
        if t.is_meta:
            self.log.value_read(".numpy()")
            return host_stand_in(t.detach()).numpy()
        return self._on_host(func, args, kwargs)

    # ---- values --------------------------------------------------------------------------------
    def _value(self, func, args, kwargs):
        t = args[0]
        if not isinstance(t, FakeTensor) and not t.is_meta:
            return self._on_host(func, args, kwargs)
        if func is _T.tolist:
            self.log.value_read(".tolist()")
            return stand_in_list(tuple(t.shape), t.dtype)
        if t.numel() != 1:  # the error PyTorch gives ("a Tensor with 2 elements ...")
            return self._on_device(func, (host_stand_in(t),) if t.is_meta else args, kwargs)
        name = func.__name__
        self.log.value_read({"item": ".item()", "__bool__": "bool()", "__float__": "float()",
                             "__int__": "int()", "__index__": "as an index",
                             "__complex__": "complex()"}.get(name, name))
        v = stand_in(t.dtype)
        if name == "__bool__":
            return bool(v)
        if name == "__float__":
            return float(v)
        if name in ("__int__", "__index__"):
            return int(v)
        if name == "__complex__":
            return complex(v)
        return v

    def _format(self, func, args, kwargs):
        t, spec = args[0], args[1] if len(args) > 1 else ""
        valueless = isinstance(t, FakeTensor) or t.is_meta
        if valueless and t.dim() == 0 and spec:
            self.log.value_read("formatted")
            return format(stand_in(t.dtype), spec)
        if valueless:
            return self._repr(func, (t,), {})
        return self._on_host(func, args, kwargs)

    def _repr(self, func, args, kwargs):
        t = args[0]
        if not isinstance(t, FakeTensor) and not t.is_meta:
            return self._on_host(func, args, kwargs)
        self.log.value_read("printed")
        text = repr(host_stand_in(t.detach()))
        extra = ", device='cuda:0'" if isinstance(t, FakeTensor) else ""
        if t.grad_fn is not None:
            extra += f", grad_fn=<{type(t.grad_fn).__name__}>"
        elif t.requires_grad:
            extra += ", requires_grad=True"
        return text[:-1] + extra + ")"

    def _getitem(self, func, args, kwargs):
        t, index = args[0], args[1]
        if isinstance(t, FakeTensor) or _scan(index) != FAKE:
            if isinstance(t, FakeTensor) or _scan(index) == FAKE:
                return self._on_device(func, args, kwargs)
            if t.is_meta or _scan(index) == VALUELESS:
                return self._valueless(func, args, kwargs)
            return self._on_host(func, args, kwargs)
        # a host tensor sliced at a GPU scalar (`data[i:i + n]` with `i` from the GPU): the
        # index is read as a stand-in, and the slice stays on the host
        index = self._scalars(index)
        if _scan(index) == FAKE:
            return self._on_device(func, (t, index), kwargs)
        return self._on_host(func, (t, index), kwargs)

    def _scalars(self, index):
        if isinstance(index, FakeTensor) and index.dim() == 0 and not index.is_floating_point():
            self.log.value_read("as an index")
            return int(stand_in(index.dtype))
        if isinstance(index, tuple):
            return tuple(self._scalars(i) for i in index)
        if isinstance(index, slice):
            return slice(self._scalars(index.start), self._scalars(index.stop),
                         self._scalars(index.step))
        return index

    def _is_cuda_read(self, func, args, kwargs):
        t = args[0]
        if isinstance(t, FakeTensor):
            frame = sys._getframe(2)
            if self.log.sees_gpu(frame.f_code.co_filename):  # the script and its libraries
                if self.log.in_script(frame.f_code.co_filename):
                    self.log.device_read(frame, "is_cuda")
                return True
        return func(*args, **kwargs)

    def _device_read(self, func, args, kwargs):
        t = args[0]
        if t.is_meta and not isinstance(t, FakeTensor) and self.log.sees_gpu(
                sys._getframe(2).f_code.co_filename):
            # a placeholder (lab.measure.sim.facade.placeholders) is a host tensor to the script
            # and its libraries: peft moves a new adapter to its layer's device unless it reads
            # `meta` (an empty-weights load), and a script may branch on `device.type == "cpu"`
            return _CPU
        return func(*args, **kwargs)


def device_reads_of_fake(log: ScriptLog):
    """A replacement for FakeTensor.device: the script and its libraries read `cuda:0` (what the
    GPU would say, so their branches on the device go the GPU's way, and `model.device` or
    `device=x.device` names the GPU); torch's own code and sim read the CPU device the fake
    tensor really has (their kernels, autocast and autograd run on it)."""
    original = FakeTensor.__dict__.get("device")
    if not isinstance(original, property):  # not a Python property in this torch: left alone
        return getattr(FakeTensor, "device")
    getter = original.fget

    def device(self):
        frame = sys._getframe(1)
        if log.sees_gpu(frame.f_code.co_filename):
            if log.in_script(frame.f_code.co_filename):
                log.device_read(frame, "device")
            return _CUDA0
        return getter(self)

    return property(device, original.fset, original.fdel, original.__doc__)


__all__ = ["DevicePlacement", "device_reads_of_fake", "host_stand_in", "op_name"]
