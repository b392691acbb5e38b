"""`memlab profile -- python train.py ARGS`, headless: the command line -> a RunRequest for the
runner -> a RunResult that says what was measured, whatever the script did.

The runner-side piece is ONE thing, and it is not in lab/runner: the request's `experiment` is
lab/profile/script.py (variant "script"), which the worker imports like any experiment file and
which runs the user's script with runpy under the tracker. So the script gets the runner's
fresh process, its JSON-lines stream, its kill-the-process-group on timeout and cancel.

Timeouts, two layers: `--timeout S` is enforced inside the worker (SIGALRM, from the moment the
script starts: what was measured becomes a `timeout` result with phases and categories); the
client's own deadline is S plus STARTUP_GRACE_S (importing torch), for a script stuck in C code
where no signal reaches Python: then the result is what the live samples showed.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab.measure.result import DeviceInfo, Peak, RunResult
from lab.runner.protocol import RunRequest

from . import compiled
from .imports import script_imports

SCRIPT = str(Path(__file__).with_name("script.py"))
LABEL = "profile"  # the results' `lesson`
STARTUP_GRACE_S = 120.0
DEFAULT_TIMEOUT_S = 3600.0
TIMEOUT_ERROR = "ScriptTimeout"
NOT_SUPPORTED = "NotSupportedInSim: "
DEFAULT_SIM_STEPS = 3  # optimizer steps a sim profile runs unless --steps says (lab.profile.steps)
PROGRESS = "\x1f"  # a line of the script's output that starts so is memlab's progress line
_PYTHON_FLAGS_IGNORED = {"-u", "-B", "-s", "-E", "-I", "-O", "-OO", "-q"}


class CommandError(ValueError):
    """The command after `--` is not a script this can run (one line)."""


@dataclass
class ScriptCommand:
    target: str  # a file, or a module with -m
    module: bool = False
    args: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.target if self.module else Path(self.target).name


def parse_command(argv: list[str]) -> ScriptCommand:
    """['python', 'train.py', '--lr', '1e-3'] / ['train.py', ...] / ['python', '-m', 'pkg.train']."""
    argv = list(argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise CommandError("what to profile? e.g. memlab profile -- python train.py --epochs 1")
    if _is_python(argv[0]):
        argv = argv[1:]
        while argv and argv[0] in _PYTHON_FLAGS_IGNORED:
            argv = argv[1:]
        if argv and argv[0] == "-m":
            if len(argv) < 2:
                raise CommandError("python -m needs a module name")
            return ScriptCommand(argv[1], True, argv[2:])
        if argv and argv[0].startswith("-"):
            raise CommandError(f"python option {argv[0]!r} is not supported here; give "
                               "`python SCRIPT.py ARGS` or `python -m MODULE ARGS`")
        if not argv:
            raise CommandError("python needs a script: memlab profile -- python train.py")
    path = Path(argv[0]).expanduser()
    if not path.is_file():
        hint = "" if path.suffix == ".py" else " (a Python script, e.g. train.py)"
        raise CommandError(f"{argv[0]}: no such file{hint}")
    return ScriptCommand(str(path), False, argv[1:])


def _is_python(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") and ".py" not in name


def profile_request(cmd: ScriptCommand, mode: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                    snapshot: str | None = None, output_path: str | None = None,
                    gpu_memory: int | None = None, steps: int | None = None,
                    gpu: str | None = None) -> RunRequest:
    """`steps`: stop after that many optimizer steps (None: sim's default, no limit elsewhere);
    `gpu`: the card a sim run predicts for (a key of lab.measure.sim.gpus; None: the H200)."""
    params = {"target": cmd.target, "module": cmd.module, "args": list(cmd.args),
              "timeout_s": timeout_s, "output_path": output_path, "steps": steps, "gpu": gpu}
    return RunRequest(LABEL, "script", mode, "", kind="profile", experiment=SCRIPT,
                      params=params, gpu_memory=gpu_memory, gpu=gpu, profile_path=snapshot,
                      timing=False, timeout_s=timeout_s + STARTUP_GRACE_S)


def run_profile(cmd: ScriptCommand, runner, mode: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                snapshot: str | None = None, output_path: str | None = None,
                gpu_memory: int | None = None, steps: int | None = None, gpu: str | None = None,
                on_event: Callable[[dict], None] | None = None,
                cancel: threading.Event | None = None) -> RunResult:
    """Profile the script in a worker; the result is always a RunResult (see finish)."""
    req = profile_request(cmd, mode, timeout_s=timeout_s, snapshot=snapshot,
                          output_path=output_path, gpu_memory=gpu_memory, steps=steps, gpu=gpu)
    samples: list[dict] = []

    def events(msg: dict) -> None:
        if msg.get("type") == "sample":
            samples.append(msg)
        if on_event:
            on_event(msg)

    r = finish(runner.run(req, on_event=events, cancel=cancel), cmd, samples, timeout_s)
    if compiled.wants_compiled_pass(r) and not (cancel is not None and cancel.is_set()):
        # the script called torch.compile: measure it again, compiled and untracked (compiled.py)
        if on_event:
            on_event({"type": "status", "stage": "compiled",
                      "text": "the script calls torch.compile: measuring the compiled run "
                              "(untracked, a fresh worker)"})
        return compiled.measure_compiled(
            r, req, lambda again: finish(runner.run(again, on_event=on_event, cancel=cancel),
                                         cmd, [], timeout_s), snapshot)
    if compiled.sites(r):
        compiled.say_eager(r)
    return r


def finish(r: RunResult, cmd: ScriptCommand, samples: list[dict], timeout_s: float) -> RunResult:
    """Name the result after the script; a timeout is a timeout; a worker that died (os._exit,
    a crash in C, a hang past the grace) keeps the peak its live samples showed."""
    r.lesson, r.variant = LABEL, cmd.label
    r.params.update({"target": cmd.target, "module": cmd.module, "args": list(cmd.args),
                     "imports": sorted(script_imports(cmd))})
    if r.status == "error" and (r.error or "").startswith(TIMEOUT_ERROR):
        r.status, r.error = "timeout", r.error.split(": ", 1)[-1]
    if r.status == "error" and (r.error or "").startswith(NOT_SUPPORTED):
        r.error = r.error[len(NOT_SUPPORTED):]  # "not supported in sim: X at train.py:N (why)"
    if r.simulated:
        r.device = simulated_device(r.params.get("gpu"), r.device.virtual_bytes)
    # a worker that reported has at least the `model` phase: only one that died keeps samples
    if r.status != "ok" and r.peak.index < 0 and not r.blocks and not r.phases and samples:
        best = max(samples, key=lambda s: s.get("live_bytes", 0))
        r.peak = Peak(bytes=int(best.get("live_bytes", 0)), phase=best.get("phase", ""))
        r.notes.append("the worker stopped before it could report: the peak and the timeline "
                       "are the live samples it streamed (about ten a second), without "
                       "categories")
    if r.status == "error" and "exited with code" in (r.error or "") and "before reporting" in \
            (r.error or ""):
        r.notes.append("the process ended without a result: os._exit(), a crash in native code, "
                       "or being killed (out of host memory?)")
    return r


def simulated_device(card: str | None, cap: int | None) -> DeviceInfo:
    """The GPU a sim profile predicts for (torch-free: lab.measure.sim.gpus is data)."""
    from lab.measure.sim.gpus import gpu

    g = gpu(card or "h200")
    name = f"{g.name} (simulated{'' if g.validated else ', unvalidated'})"
    return DeviceInfo(name, "sim", g.total_bytes, cap)


__all__ = ["CommandError", "DEFAULT_SIM_STEPS", "LABEL", "PROGRESS", "SCRIPT", "ScriptCommand",
           "finish", "parse_command", "profile_request", "run_profile", "simulated_device"]
