"""Stack frames of a snapshot: which frame is the user's, what it is called, what phase it was.

A frame is `{"filename", "line", "name"}`. With `stacks="python"` every frame is a Python frame;
with `stacks="all"` C++ frames (filename `*.cpp`/`*.h`/`??`, names such as
`at::native::empty_cuda`) are interleaved, innermost first. Allocations made by the autograd
engine run on its own C++ thread: with Python stacks they have *no* frame at all, with C++
stacks they show `torch::autograd::Engine::thread_main`.

Everything here is best effort and says so in the names: `guess_phase`, `guess_category`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

Frame = dict  # {"filename": str, "line": int, "name": str}

NO_STACK = "(no Python stack)"

# Phases, in the order a training step usually goes through them.
PHASES = ("model setup", "data", "forward", "backward", "optimizer step", "zero_grad", "other",
          "unknown")
# What a block still live later usually *is*, given the phase that allocated it.
_CATEGORY_BY_PHASE = {
    "model setup": "parameters",
    "data": "inputs",
    "forward": "activations",
    "backward": "gradients",
    "optimizer step": "optimizer_state",
    "zero_grad": "gradients",
}


@lru_cache(maxsize=65536)
def is_python_file(filename: str) -> bool:
    return filename.endswith(".py") or (filename.startswith("<") and filename.endswith(">")
                                        and not filename.startswith("<unknown"))


@lru_cache(maxsize=65536)
def short_path(filename: str) -> str:
    """'…/site-packages/transformers/models/gpt2/modeling_gpt2.py' -> 'transformers/models/…'."""
    parts = filename.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[len(parts) - parts[::-1].index(marker):])
    return "/".join(parts[-2:])


@lru_cache(maxsize=65536)
def is_internal(filename: str) -> bool:
    """Frames a learner did not write: torch itself, the standard library, the lab's engine."""
    f = filename.replace("\\", "/")
    if not is_python_file(f) or f.startswith("<frozen"):
        return True
    if "/torch/" in f or f.startswith("torch/") or "/functorch/" in f:
        return True
    if "/lib/python3" in f and "-packages/" not in f:
        return True  # the standard library (contextlib, threading, runpy, ...)
    if is_generated_by_inductor(f):
        return True  # the user's frame is the line that called the compiled code
    return "/lab/measure/" in f or "/lab/runner/" in f or "/lab/profile/" in f


INDUCTOR_MARK = " (in a compiled graph)"  # no [...]: a table would read it as markup


@lru_cache(maxsize=65536)
def is_generated_by_inductor(filename: str) -> bool:
    """torch.compile's kernels' wrapper code, which Inductor writes to its cache folder
    (/tmp/torchinductor_<user>/xy/c....py by default, or TORCHINDUCTOR_CACHE_DIR)."""
    return "torchinductor_" in filename or "/inductor_cache/" in filename


def label(frame: Frame | None) -> str:
    """'file.py:123 function' (short path), the key live memory is grouped by."""
    if not frame:
        return NO_STACK
    fn = frame.get("filename", "") or "??"
    if is_generated_by_inductor(fn):  # a hashed file name says nothing: say what it is
        return f"Inductor's generated code:{frame.get('line', 0)} {frame.get('name', '')}"
    if is_python_file(fn):
        return f"{short_path(fn)}:{frame.get('line', 0)} {frame.get('name', '')}"
    return f"{frame.get('name', '') or '??'} (C++)"


def user_frame(frames: list[Frame] | None) -> Frame | None:
    """The innermost frame of the user's own code; else the innermost Python frame that is not
    dispatch machinery (an allocation on autograd's thread under the lab's tracker has only
    those); else None."""
    if not frames:
        return None
    first_py = None
    for fr in frames:
        fn = fr.get("filename", "")
        if not is_internal(fn):
            return fr
        if first_py is None and is_python_file(fn) and not is_machinery(fn):
            first_py = fr
    return first_py


_CPP_NOISE = ("unwind", "CapturedTraceback", "gather", "c10::cuda::CUDACachingAllocator", "_start",
              "__libc", "Py", "std::", "c10::impl", "c10::Dispatcher", "c10::Boxed", "c10::KernelFunction")


def cpp_frame(frames: list[Frame] | None) -> Frame | None:
    """The most telling C++ frame: an autograd node (`MmBackward0`), else an ATen op."""
    if not frames:
        return None
    named = [f for f in frames if not is_python_file(f.get("filename", "")) and f.get("name")
             and not any(n in f["name"] for n in _CPP_NOISE)]
    for pick in (lambda n: "Backward" in n, lambda n: n.startswith("at::"), lambda n: True):
        for f in named:
            if pick(f["name"]):
                return f
    return None


def where(frames: list[Frame] | None) -> str:
    """The label live memory is grouped by: the user's frame, else a telling C++ frame."""
    fr = user_frame(frames)
    if fr is None:
        fr = cpp_frame(frames)
    compiled = any(is_generated_by_inductor(f.get("filename", "")) for f in frames or ())
    if fr is not None and is_generated_by_inductor(fr.get("filename", "")):
        return label(fr)  # no caller of the user's: the generated code's own line says it
    return label(fr) + (INDUCTOR_MARK if compiled else "")


def python_frames(frames: Iterable[Frame]) -> list[Frame]:
    return [f for f in frames if is_python_file(f.get("filename", ""))]


# Frames between an op and its allocation that say nothing about the program: torch's op call
# and mode plumbing, and the lab's own tensor tracker (a dispatch mode, so on the stack of every
# allocation a lab run makes on the GPU).
_MACHINERY = ("/torch/_ops.py", "/torch/utils/_python_dispatch.py", "/torch/utils/_device.py",
              "/torch/_subclasses/", "/lab/measure/")


@lru_cache(maxsize=65536)
def is_machinery(filename: str) -> bool:
    f = filename.replace("\\", "/")
    return any(m in f for m in _MACHINERY)


def shown_frames(frames: Iterable[Frame]) -> list[Frame]:
    """The frames worth showing a reader, innermost first: the Python ones without the dispatch
    machinery (else all of them, when a stack has only C++ frames)."""
    frames = list(frames)
    py = python_frames(frames)
    return [f for f in py if not is_machinery(f.get("filename", ""))] or py or frames


@lru_cache(maxsize=65536)
def _frame_vote(filename: str, name: str) -> str | None:
    """What one frame says about the phase (None: nothing)."""
    f = filename.replace("\\", "/")
    if not is_python_file(f):  # C++ frames (stacks="all")
        if "autograd::Engine" in name or "Backward" in name or "AccumulateGrad" in name:
            return "backward"
        return None
    if "/torch/utils/checkpoint.py" in f and ("unpack" in name or "recompute" in name):
        return "backward"  # activation checkpointing recomputes the forward during backward
    if ("/torch/autograd/" in f or f.endswith("/torch/_tensor.py")) and "backward" in name:
        return "backward"
    if "/torch/optim/" in f:
        return "zero_grad" if name == "zero_grad" else "optimizer step"
    if name == "zero_grad":
        return "zero_grad"
    if "/torch/utils/data/" in f:
        return "data"
    if f.endswith("/torch/nn/modules/module.py") and name in ("_apply", "to", "cuda", "half",
                                                              "bfloat16", "float", "load_state_dict"):
        return "model setup"
    if "/torch/nn/" in f and name in ("__init__", "reset_parameters", "_init_weights"):
        return "model setup"
    if name in ("__init__", "init_weights", "_init_weights", "post_init") and not is_internal(f):
        return None  # a user's __init__ may build the model, or anything else: no vote
    if name in ("forward", "_call_impl", "_wrapped_call_impl") or "/torch/nn/functional.py" in f:
        return "forward"
    return None


# when several frames vote, the strongest wins (a forward recomputed inside backward is backward)
_RANK = {"backward": 0, "optimizer step": 1, "zero_grad": 2, "model setup": 3, "data": 4,
         "forward": 5}


def guess_phase(frames: list[Frame] | None, has_stacks: bool = True) -> str:
    """Best-effort phase of one allocation from its stack.

    No frame at all, in a snapshot that recorded stacks, means the allocation was made on a thread
    without Python code: on a GPU that is almost always the autograd engine running backward.
    """
    if not frames:
        return "backward" if has_stacks else "unknown"
    best, best_rank = None, 99
    for fr in frames:
        v = _frame_vote(fr.get("filename", ""), fr.get("name", ""))
        if v is not None and _RANK[v] < best_rank:
            best, best_rank = v, _RANK[v]
    if best is None:
        return "other"
    # a module's __init__ on the stack of an allocation made through nn.Module machinery
    if best == "forward" and any(fr.get("name") == "__init__" and "/torch/nn/" in
                                 fr.get("filename", "").replace("\\", "/") for fr in frames):
        return "model setup"
    return best


def guess_category(phase: str) -> str:
    """What a block that is still live later most likely is, from the phase that allocated it."""
    return _CATEGORY_BY_PHASE.get(phase, "other")


def has_cpp(frames: Iterable[Frame]) -> bool:
    return any(not is_python_file(f.get("filename", "")) for f in frames)


__all__ = ["NO_STACK", "PHASES", "cpp_frame", "where", "guess_category", "guess_phase", "has_cpp", "is_internal",
           "is_machinery", "is_python_file", "label", "python_frames", "short_path", "shown_frames",
           "user_frame"]
