"""Which mode and scale a run gets: ONE rule for the app and the CLI. Torch-free (the caller
probes for a GPU, lazily, and passes the answer in), so the decision and its reason are cheap.

    choose("auto", None, gpu="NVIDIA H200")   -> cuda at seed scale
    choose("auto", None, gpu=None)            -> sim at seed scale (comparable with the H200 recordings)
    choose("auto", "small", gpu=None)         -> cpu at small scale (a real run, in seconds)
    choose("cpu", None, gpu=None)             -> cpu at small scale
    choose("cpu", "seed", gpu=None)           -> cpu at seed scale, with a warning: minutes

The rule: `auto` measures the real thing when it can. With a CUDA GPU that is `cuda`, at the seed
scale unless another is asked for. Without one, the seed scale cannot run for real in reasonable
time on a laptop, so it is simulated (exact tensor bytes, the same sizes as the H200
recordings, so the two compare); small scale (asked for) runs for real on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModeInfo:
    """What a mode is, as everything outside the backends asks it (never by its name)."""

    name: str
    on_gpu: bool  # runs on a real CUDA GPU (needs one visible to PyTorch)
    simulated: bool  # fake tensors: exact bytes, no values; allocator numbers predicted
    timed: bool  # step times are measured (an untracked pass)
    allocator: str  # the caching allocator's counters: "measured" | "predicted" | "none"
    default_scale: str  # seed (GPU-sized) or small (seconds on a CPU)
    ranks_in_one_process: bool  # many ranks simulated in one process (fake process group)
    cuda_kernels: bool  # takes CUDA's kernels' paths (what they save, their workspaces): cuda, sim
    label: str  # where its numbers come from, in a word a learner reads


MODE_INFO: dict[str, ModeInfo] = {
    "cuda": ModeInfo("cuda", on_gpu=True, simulated=False, timed=True, allocator="measured",
                     default_scale="seed", ranks_in_one_process=False, cuda_kernels=True,
                     label="your GPU"),
    "cpu": ModeInfo("cpu", on_gpu=False, simulated=False, timed=True, allocator="none",
                    default_scale="small", ranks_in_one_process=False, cuda_kernels=False,
                    label="your CPU"),
    "sim": ModeInfo("sim", on_gpu=False, simulated=True, timed=False, allocator="predicted",
                    default_scale="seed", ranks_in_one_process=True, cuda_kernels=True,
                    label="simulated"),
}
MODES = tuple(MODE_INFO)  # ("cuda", "cpu", "sim"): the one definition
SCALES = ("seed", "small")
SCALE_HELP = ("seed: the sizes of the seed tutorials the course was built from (a 2 GB "
              "nn.Linear, GPT-2 at batch 8 × 1024: GPU-sized); small: the same code shrunk to "
              "run in seconds on a laptop CPU")
MODE_HELP = ("auto: cuda when a CUDA GPU is present, else sim at seed scale (or cpu when "
             "--scale small is asked); cuda: the real caching allocator; cpu: a real run on "
             "this CPU; sim: exact tensor bytes under FakeTensorMode, no timings")


class ModeError(ValueError):
    """The mode asked for cannot run here (one line, says what would)."""


@dataclass(frozen=True)
class ModeChoice:
    mode: str  # cuda | cpu | sim
    scale: str  # seed | small
    reason: str  # one line: why this mode and scale
    warning: str = ""  # one line when the choice will be slow (cpu at seed scale)

    @property
    def info(self) -> ModeInfo:
        return MODE_INFO[self.mode]

    def line(self) -> str:
        return f"mode {self.mode} at {self.scale} scale — {self.reason}"


def mode_info(mode: str) -> ModeInfo:
    """The table row of `mode`; a one-line ModeError for anything else."""
    try:
        return MODE_INFO[mode]
    except KeyError:
        raise ModeError(f"mode {mode!r} is not one of {', '.join(MODES)}") from None


def may_use_gpu(requested: str) -> bool:
    """Whether `requested` (auto or a mode) could run on a GPU: only then is one probed for,
    which imports torch. An unknown name is `choose`'s to refuse."""
    return requested == "auto" or (requested in MODE_INFO and MODE_INFO[requested].on_gpu)


def default_scale(mode: str) -> str:
    """cpu runs the small sizes; cuda and sim the seed's."""
    return mode_info(mode).default_scale


def choose(requested: str = "auto", scale: str | None = None, *, gpu: str | bool | None,
           lesson_modes: tuple[str, ...] | list[str] = MODES) -> ModeChoice:
    """`gpu`: the CUDA GPU's name (or True) when one is visible, else None/False."""
    if requested not in ("auto", *MODES):
        raise ModeError(f"mode {requested!r} is not one of auto, {', '.join(MODES)}")
    if scale is not None and scale not in SCALES:
        raise ModeError(f"scale {scale!r} is not one of {', '.join(SCALES)}")
    gpu_name = gpu if isinstance(gpu, str) else "a CUDA GPU"
    if requested != "auto":
        mode = requested
        if mode == "cuda" and not gpu:
            raise ModeError("mode cuda needs a CUDA GPU and none is visible to PyTorch; "
                            "use sim (full scale, simulated) or cpu (small scale, real)")
        if mode not in lesson_modes:
            raise ModeError(f"this lesson runs in modes {', '.join(lesson_modes)}, not {mode}")
        scale = scale or default_scale(mode)
        reason = "as asked"
    elif gpu:
        mode, scale = "cuda", scale or "seed"
        reason = f"auto: {gpu_name} is here, so the real caching allocator is measured"
    elif scale == "small":
        mode = "cpu"
        reason = "auto: no CUDA GPU here; small scale runs for real on this CPU"
    else:
        mode, scale = "sim", "seed"
        reason = ("auto: no CUDA GPU here, so the full-size run is simulated: exact tensor bytes, "
                  "comparable with the H200 recordings (cpu at small scale runs it for real)")
    if mode not in lesson_modes:  # auto only: fall back to what the lesson allows here
        usable = [m for m in lesson_modes if m != "cuda" or gpu]
        if not usable:
            raise ModeError(f"this lesson runs only in modes {', '.join(lesson_modes)}, "
                            "and there is no CUDA GPU here")
        mode = usable[0]
        reason += f"; this lesson does not run in that mode, so {mode}"
    warning = ""
    if mode == "cpu" and scale == "seed":
        warning = ("cpu at seed scale runs the full-size model on this CPU: expect minutes per "
                   "variant and many GB of RAM (sim gives the same tensor bytes in seconds)")
    return ModeChoice(mode, scale, reason, warning)


__all__ = ["MODES", "MODE_HELP", "MODE_INFO", "ModeChoice", "ModeError", "ModeInfo", "SCALES",
           "SCALE_HELP", "choose", "default_scale", "may_use_gpu", "mode_info"]
