"""The experiment `memlab profile` hands the runner: the user's own script, run with runpy in
the worker, under the lab's tensor tracker, its phases found by `AutoPhases`.

Run by `lab.runner.worker` like any experiment file (RunRequest.experiment points here, variant
"script"); `run.p` carries `target` (a path, or a module for `-m`), `module` (bool), `args`,
`timeout_s`, `output_path`, `steps` (None: no limit) and `gpu` (sim: the card). Whatever the
script does, the measurement so far is a result:

  an exception      status error, its first line, and where in the script it was raised
  sys.exit(0)       status ok, with a note: what ran until then was measured
  sys.exit(N)       status error: "the script exited with code N"
  --steps N         status ok after N optimizer steps, noted (lab.profile.steps)
  --timeout         SIGALRM in the worker stops it (status timeout, set by lab.profile.run);
                    what hangs in C code past that is killed by the client a little later

In sim the script runs inside the CUDA facade (lab.measure.sim.facade.cuda_facade): its `cuda`
tensors are sim's fake ones on the chosen card, its torch.cuda calls answer from that card and the
allocator model, and what the facade answered its own way becomes the result's notes.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback

from lab.profile import compiled
from lab.profile.phases import AutoPhases
from lab.profile.steps import DEFAULT_SIM_STEPS, PROGRESS, EvalCap, StepLimit, StepsDone


class _Alarm(BaseException):
    """SIGALRM in the script's main thread: a BaseException, so the script's own
    `except Exception:` does not swallow it."""


class ScriptTimeout(Exception):
    """The script ran past --timeout."""


class ScriptExit(Exception):
    """The script called sys.exit with a non-zero code."""


class ScriptInterrupted(Exception):
    """KeyboardInterrupt inside the script: a result, not a dead worker."""


class _Tee:
    """The script's prints: to the output file (the CLI shows it live) and where they went."""

    def __init__(self, file, stream):
        self.file, self.stream = file, stream

    def write(self, text):
        self.file.write(text)
        try:
            return self.stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self):
        self.file.flush()
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):  # isatty, encoding, fileno, ...: the original stream's
        return getattr(self.stream, name)


def where_raised(tb, folder: str, exc: BaseException | None = None) -> str:
    """'train.py:12 (main)': the innermost frame of the script's folder, else the innermost
    frame outside torch and the standard library. A SyntaxError names the line it points at
    (its frames are the import machinery's, not the script's)."""
    from lab.snapshots.frames import is_internal

    if isinstance(exc, SyntaxError) and exc.filename and not exc.filename.startswith("<"):
        return f"{os.path.basename(exc.filename)}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(tb) if not _hidden(f.filename)]
    mine = [f for f in frames if os.path.abspath(f.filename).startswith(folder + os.sep)]
    other = [f for f in frames if not is_internal(f.filename)]
    f = (mine or other or frames or [None])[-1]
    return f"{os.path.basename(f.filename)}:{f.lineno} ({f.name})" if f else "?"


_LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _hidden(filename: str) -> bool:
    """Frames a user's traceback does not show: memlab's own (the worker, the tracker, sim's
    facade) and runpy's, which are how the script was started, not what it did."""
    path = os.path.abspath(filename)
    return ((path.startswith(_LAB) and not path.startswith(_LAB + "_course" + os.sep))
            or "runpy" in filename or filename.startswith("<frozen importlib"))


def _run(p) -> None:
    if p.module:
        sys.argv = [p.target, *p.args]
        sys.path.insert(0, os.getcwd())  # what `python -m` does
        runpy.run_module(p.target, run_name="__main__", alter_sys=True)
    else:
        path = os.path.abspath(p.target)
        sys.argv = [path, *p.args]
        sys.path.insert(0, os.path.dirname(path))  # what `python train.py` does
        runpy.run_path(path, run_name="__main__")


def script(run, p=None) -> None:
    """The variant the worker calls: the user's script under the tracker (`p`: the parameters
    above; default `run.p`, the request's)."""
    p = run.p if p is None else p
    folder = os.path.dirname(os.path.abspath(p.target)) if not p.module else os.getcwd()
    saved = sys.argv[:], sys.path[:], sys.stdout, sys.stderr
    out = open(p.output_path, "a", buffering=1, encoding="utf-8") if p.output_path else None
    if out is not None:
        sys.stdout, sys.stderr = _Tee(out, sys.stdout), _Tee(out, sys.stderr)
    timeout = float(p.timeout_s or 0)
    steps = getattr(p, "steps", None)
    if steps is None and run.simulated:
        steps = DEFAULT_SIM_STEPS

    def on_alarm(signum, frame):
        raise _Alarm()

    old_alarm = signal.signal(signal.SIGALRM, on_alarm) if timeout > 0 else None
    # the compiled pass (lab.profile.compiled): real torch.compile, no tracker, no phase hooks
    compiled_pass = bool(getattr(p, compiled.COMPILED_PASS, False))
    auto = AutoPhases(run.tracker, records=run.phases, on_phase=run._on_phase) \
        if run.tracker is not None and not compiled_pass else None
    sim = _SimScript(run, folder, steps) if run.simulated else None
    watch = compiled.CompileWatch(real=compiled_pass and sim is None,
                                  estimate=sim.estimator() if compiled_pass and sim else None)
    limit = StepLimit(steps, progress=_Progress(run, out or sys.__stderr__, steps, sim))
    try:
        if timeout > 0:
            signal.setitimer(signal.ITIMER_REAL, timeout)
        with watch, compiled.untracked() if compiled_pass and sim is None else _nothing(), \
                auto if auto is not None else _nothing(), sim or _nothing(), limit:
            _run(p)
    except StepsDone as e:
        default = ", the default in sim" if getattr(p, "steps", None) is None else ""
        run.note(f"stopped after {e.args[0]} optimizer step{'s' if e.args[0] != 1 else ''} "
                 f"(--steps {steps}{default}) at {where_raised(e.__traceback__, folder)}: "
                 "everything until then was measured; the script's lines after it did not run")
    except SystemExit as e:
        code = e.code if e.code is not None else 0
        where = where_raised(e.__traceback__, folder)
        if code in (0, "0"):
            run.note(f"the script called sys.exit(0) at {where}; everything until then was "
                     "measured")
        else:
            _tail(out, e)
            raise ScriptExit(f"the script exited with code {code} at {where}") from None
    except KeyboardInterrupt as e:
        raise ScriptInterrupted(f"interrupted at {where_raised(e.__traceback__, folder)}") from None
    except _Alarm as e:
        run.note(f"stopped by --timeout at {where_raised(e.__traceback__, folder)} "
                 f"(phase {auto.name if auto else '?'})")
        raise ScriptTimeout(f"the script ran past --timeout {timeout:g} s and was stopped; "
                            "what ran until then was measured") from None
    except Exception as e:
        import torch

        phase = f" (phase {auto.name})" if auto else ""
        if isinstance(e, torch.OutOfMemoryError):  # a result: PyTorch's message, no traceback
            run.note(f"out of memory at {where_raised(e.__traceback__, folder, e)}{phase}")
        elif sim is None or not sim.refused(e):  # a refusal is one line that names its site
            run.note(f"the script raised {type(e).__name__} at "
                     f"{where_raised(e.__traceback__, folder, e)}{phase}")
            _tail(out, e)
        raise
    finally:
        compiled.record(run, watch)
        if timeout > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_alarm)
        sys.argv[:], sys.path[:] = saved[0], saved[1]
        sys.stdout, sys.stderr = saved[2], saved[3]
        if out is not None:
            out.close()
        if sim is not None:
            for note in sim.notes():
                run.note(note)
            sim.record_estimate(run)
    if sim is not None and sim.facade.log.refused is not None:
        raise sim.facade.log.refused  # the script caught it and went on: still not supported


def run_script(run, target: str | os.PathLike, args: list[str] = (), *, steps: int | None = None,
               output_path: str | None = None) -> None:
    """`python TARGET ARGS` as `memlab profile` runs it, from another experiment's variant
    (lesson 26 profiles the training script it ships): the same tracker, phases, step limit
    and, in sim, the same CUDA facade; what the run's notes say is what profile's would."""
    from types import SimpleNamespace

    script(run, SimpleNamespace(target=str(target), module=False, args=[str(a) for a in args],
                                timeout_s=0, output_path=output_path, steps=steps, gpu=None))


class _SimScript:
    """The script's sim run: the CUDA facade on the chosen card, and the evaluation cap."""

    def __init__(self, run, folder: str, steps: int | None):
        import torch

        backend = run.backend  # a SimBackend: its card, allocator model and CUDA paths
        self.values = backend.policy.values  # sim's value assumptions for libraries
        self.card = backend.gpu
        self.capped = backend.allocator_model.model.cap is not None
        self.facade = backend.cuda_facade(script_dir=folder)

        def make(shape, stride, dtype):
            return torch.empty_strided(shape, stride, dtype=dtype, device="cuda")

        self.eval_cap = EvalCap(steps, make) if steps else None
        self._stack = None

    def __enter__(self):
        from contextlib import ExitStack

        self._stack = ExitStack()
        self._stack.enter_context(self.facade)
        if self.eval_cap is not None:
            self._stack.enter_context(self.eval_cap)
        return self

    def __exit__(self, *exc):
        self._stack.close()
        return False

    def estimator(self):
        """sim's compiled pass: torch.compile traced on fake tensors (lab.measure.sim.compiled),
        what it saw kept in `compile_stats` for the result."""
        from lab.measure.sim.compiled.capture import compile_for_estimate
        from lab.measure.sim.compiled.stats import CompileStats

        self.compile_stats = CompileStats()

        values = self.values

        def library():  # transformers' own mask code inside a region (Dynamo traces it)
            return values.suspend()

        def estimate(original, model, **kwargs):
            return compile_for_estimate(original, model, self.compile_stats,
                                        lambda: self.facade.placement, library, **kwargs)

        return estimate

    def record_estimate(self, run) -> None:
        """The compiled pass: what the estimate saw, as metrics and notes the client reads
        (lab.profile.compiled_estimate)."""
        stats = getattr(self, "compile_stats", None)
        if stats is not None:
            stats.record(run)

    def refused(self, exc: BaseException) -> bool:
        from lab.measure.sim.facade.script_values import NotSupportedInSim

        return isinstance(exc, NotSupportedInSim)

    def notes(self) -> list[str]:
        from lab.report.units import capacity, format_bytes

        c = self.card
        if self.capped:
            limit = (f"capped by --gpu-memory at {capacity(self.facade.allocator.model.cap)} "
                     "for PyTorch's caching allocator (set_per_process_memory_fraction; the CUDA "
                     "context outside the cap)")
        else:  # the card's size said once, as CUDA reports it (GiB: its OOM message's unit)
            limit = (f"{capacity(c.total_bytes)} as CUDA reports it, "
                     f"{format_bytes(c.limit_bytes)} of it for PyTorch's caching allocator (the "
                     "card's memory minus the CUDA context)")
        # an unvalidated card's row is noted by the sim backend itself
        card = f"predicted for {c.device_name}: {limit}" + (
            " (the card sim was validated on)" if c.validated else "")
        out = [card, "torch.cuda's memory calls (memory_allocated, max_memory_reserved, "
                     "memory_stats ...) answer the script with the allocator model's "
                     "predictions"]
        out += self.facade.log.render()
        if self.eval_cap is not None and self.eval_cap.note():
            out.append(self.eval_cap.note())
        return out


class _Progress:
    """One line per optimizer step, shown by `memlab profile` on stderr (PROGRESS-marked in
    the script's output stream, so the CLI tells it from the script's own lines)."""

    def __init__(self, run, stream, limit: int | None, sim):
        import time

        self.run, self.stream, self.limit, self.sim = run, stream, limit, sim
        self.t0 = time.perf_counter()

    def __call__(self, step: int) -> None:
        import time

        from lab.report.units import format_bytes

        of = f"/{self.limit}" if self.limit else ""
        tr = self.run.tracker
        if self.sim is not None:
            s = self.sim.facade.memory
            what = (f"predicted max allocated {format_bytes(s.stats.peak_allocated)}, max "
                    f"reserved {format_bytes(s.stats.peak_reserved)} on {self.sim.card.name}")
        elif tr is not None:
            what = f"live tensors {format_bytes(tr.live_bytes)}"
        else:
            what = ""
        line = f"memlab: step {step}{of} done · {what} · {time.perf_counter() - self.t0:.1f} s"
        try:
            self.stream.write(PROGRESS + line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _tail(out, exc: BaseException) -> None:
    """The traceback goes where the script's output goes (the CLI shows it) as Python would
    print it for `python train.py`: without memlab's frames (how the script was started, the
    tracker and sim's facade between the script and torch) and runpy's, chained exceptions
    alike."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen, todo = set(), [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack[:] = [f for f in t.stack if not _hidden(f.filename)]
        todo += [x for x in (t.__cause__, t.__context__) if x is not None]
    (out or sys.stderr).write("".join(te.format()))


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
