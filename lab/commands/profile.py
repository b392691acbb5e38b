"""`memlab profile -- python train.py ARGS`: your own script, measured by the lab's tracker.

    memlab profile -- python train.py --epochs 1       auto: cuda with a GPU, else sim
    memlab profile --mode sim --gpu a100-40gb -- python train.py   your CUDA script, no GPU here
    memlab profile --mode sim --gpu-memory 24GB --steps 2 -- python train.py
    memlab profile --mode cpu --timeout 60 -- python train.py
    memlab profile --json -- python -m mypkg.train      the RunResult as JSON
    memlab profile --snapshot p.pkl -- python train.py  a memory_viz snapshot (always on CUDA)

The script runs in a worker process (the runner's), unchanged: phases are found from PyTorch's
hooks (forward, backward, optimizer step; `memlab.phase("…")` for your own), every storage is
categorised, and the peak is shown with what was live there and its file:line. A script that
raises, exits early or runs past --timeout still gives a result: what was measured until then.
Its own output is shown as it runs (on stderr, after "│ "), and a line per optimizer step.

`--mode sim` runs a CUDA script on a machine without a GPU and predicts what it needs on the
chosen card (lab.measure.sim.facade.cuda_facade: its `cuda` tensors are fake, its torch.cuda calls
answer from the card and the allocator model); it stops after 3 optimizer steps unless
--steps says otherwise. `auto` without a GPU is sim: the question a CUDA script asks is about
the GPU, and a real CPU run answers another one (--mode cpu still gives it).

Exit codes (EXIT_CODES): 0 the script ran to its end or to --steps (a completed measurement or
prediction), 1 the script failed (raised, exited non-zero, ran past --timeout, was refused by
sim in one line), 2 bad input to memlab, 3 out of memory (the GPU's, or in sim the card's as
predicted: a result, with PyTorch's message and the report, no traceback).
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from lab.commands import UsageError, gpu_memory_arg, seconds_arg

EXIT_OK, EXIT_FAILED, EXIT_OOM = 0, 1, 3  # 2: bad input (lab.commands.UsageError)
EXIT_CODES = {"ok": EXIT_OK, "oom": EXIT_OOM}  # any other status: EXIT_FAILED
EPILOG = ("exit codes: 0 the script ran to its end (or to --steps): a completed prediction or "
          "measurement; 1 the script failed (an exception, a non-zero exit, --timeout, an op sim "
          "cannot run); 2 bad input to memlab; 3 out of memory (in sim: where the card would "
          "run out)")


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="run your own training script under the lab's tracker: "
                                       "phases, categories, the peak and its file:line",
                       epilog=EPILOG)
    from lab.measure.sim.gpus import GPUS

    p.add_argument("--mode", default="auto", choices=["auto", "cuda", "cpu", "sim"],
                   help="auto: cuda when a GPU is present, else sim; cpu: a real run on this "
                        "CPU; sim: your CUDA script predicted on a GPU (--gpu), no GPU needed")
    p.add_argument("--gpu", metavar="CARD",
                   help=f"sim: the card to predict for: {', '.join(GPUS)} (default h200; sim is "
                        "validated on h200 and h100, others are marked unvalidated); with --gpu-memory, "
                        "that card capped")
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help="stop after N optimizer steps (a clean stop; default: 3 in sim, no "
                        "limit otherwise); in sim evaluation loops run N passes of one shape")
    p.add_argument("--timeout", type=seconds_arg, default=None, metavar="S",
                   help="stop the script after S seconds (from its start; default 3600); what "
                        "ran until then is the result")
    p.add_argument("--snapshot", metavar="FILE",
                   help="write a memory snapshot (pytorch.org/memory_viz, memlab view); on "
                        "CUDA one is written by default: memlab-profile-<script>.pkl")
    p.add_argument("--no-snapshot", action="store_true", help="no snapshot, on CUDA either")
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help="a smaller virtual GPU: the script runs out of memory above it (sim: "
                        "the card, an H200 unless --gpu says, capped at SIZE)")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="storages live at the peak to list (default 10)")
    p.add_argument("--quiet", action="store_true", help="do not echo the script's output")
    p.add_argument("command", nargs="*", metavar="-- python SCRIPT.py ARGS",
                   help="the script and its arguments, after --")
    p.set_defaults(func=main)


def _mode(asked: str) -> str:
    """The one mode rule (lab.measure.modes.choose): auto is cuda with a GPU, else sim."""
    from lab.measure.device import cuda_available
    from lab.measure.modes import ModeError, choose

    try:
        return choose(asked, gpu=cuda_available()).mode
    except ModeError as e:
        raise UsageError(f"--mode {asked}: {e}") from None


class _Echo(threading.Thread):
    """Shows the script's output as it grows (the worker writes it to a file), and memlab's
    progress lines among it (lab.profile.steps.PROGRESS); `quiet`: the progress lines only."""

    def __init__(self, path: Path, quiet: bool = False):
        super().__init__(daemon=True)
        self.path, self.stop, self.pos, self.partial = path, threading.Event(), 0, ""
        self.quiet = quiet

    def run(self) -> None:
        while not self.stop.wait(0.2):
            self.drain()
        self.drain(final=True)

    def drain(self, final: bool = False) -> None:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.pos)
                text = f.read()
                self.pos = f.tell()
        except OSError:
            return
        lines = (self.partial + text).split("\n")
        self.partial = "" if final else lines.pop()
        from lab.profile.run import PROGRESS

        for line in lines if not final else [x for x in lines if x]:
            if line.startswith(PROGRESS):
                print(line[len(PROGRESS):], file=sys.stderr, flush=True)
            elif not self.quiet:
                print(f"│ {line}", file=sys.stderr, flush=True)


def main(args) -> int:
    from lab.profile.run import CommandError, parse_command

    try:
        cmd = parse_command(args.command)
    except CommandError as e:
        raise UsageError(str(e)) from None
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.steps is not None and args.steps < 1:
        raise UsageError("--steps must be at least 1 (optimizer steps)")
    from lab.serve.policy import Refused, refuse_if_served

    try:  # the script would run on the server, reading and writing outside the learner's folder
        refuse_if_served("memlab profile (your own script)")
    except Refused as e:
        raise UsageError(str(e)) from None
    from lab.measure.modes import mode_info

    gpu_memory = gpu_memory_arg(args.gpu_memory)
    mode = _mode(args.mode)
    if args.gpu is not None:
        from lab.measure.sim.gpus import gpu

        if not mode_info(mode).simulated:
            raise UsageError(f"--gpu names the card a sim run predicts for; in mode {mode} the "
                             "run is measured where it runs (use --mode sim, or --gpu-memory)")
        try:
            args.gpu = gpu(args.gpu).key
        except ValueError as e:
            raise UsageError(f"--gpu: {e}") from None
    snapshot = args.snapshot
    if snapshot is None and mode_info(mode).on_gpu and not args.no_snapshot:
        snapshot = f"memlab-profile-{Path(cmd.label).stem.replace('.', '-')}.pkl"
    if snapshot:
        from lab.commands.run import check_writable_file

        snapshot = str(check_writable_file(snapshot, "--snapshot").resolve())
    return _profile(args, cmd, mode, snapshot, gpu_memory)


def _profile(args, cmd, mode: str, snapshot: str | None, gpu_memory: int | None) -> int:
    from lab.profile.run import DEFAULT_SIM_STEPS, DEFAULT_TIMEOUT_S, run_profile
    from lab.runner.client import SubprocessRunner

    from lab.measure.modes import mode_info

    why = "asked for" if args.mode != "auto" else ("a CUDA GPU is present" if mode_info(mode).on_gpu
                                                   else "no CUDA GPU here")
    simulated = mode_info(mode).simulated
    if simulated:
        from lab.measure.sim.gpus import gpu

        card = gpu(args.gpu or "h200").name + (" capped at " + args.gpu_memory if gpu_memory
                                               else "")
        why += f"; predicted for {card}"
    print(f"memlab: profiling {cmd.label} in mode {mode} ({why}); the script runs in a worker",
          file=sys.stderr)
    stop = args.steps or (DEFAULT_SIM_STEPS if simulated else None)
    if stop:  # said before the run: its last lines (a final print, a save) will not run
        print(f"memlab: the script stops after {stop} optimizer step{'s' * (stop != 1)} "
              f"(--steps {stop}{', the default in sim' if not args.steps else ''}); its lines "
              "after that do not run", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="memlab-profile-") as tmp:
        out = Path(tmp) / "output.txt"
        out.touch()
        echo = _Echo(out, quiet=args.quiet)
        echo.start()
        started = time.perf_counter()
        try:
            r = run_profile(cmd, SubprocessRunner(), mode,
                            timeout_s=args.timeout or DEFAULT_TIMEOUT_S, snapshot=snapshot,
                            output_path=str(out), gpu_memory=gpu_memory, steps=args.steps,
                            gpu=args.gpu)
        finally:
            echo.stop.set()
            echo.join(timeout=2)
    print(f"memlab: {cmd.label} {r.status} after {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    if args.json:
        print(json.dumps(r.to_dict(), indent=1))
    else:
        from lab.profile.text import render

        print(render(r, top=args.top))
    return EXIT_CODES.get(r.status, EXIT_FAILED)
