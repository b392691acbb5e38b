"""`memlab profile -- python train.py ARGS`: your own script, measured by the lab's tracker.

    memlab profile -- python train.py --epochs 1       auto: cuda with a GPU, else cpu
    memlab profile --mode cpu --timeout 60 -- python train.py
    memlab profile --json -- python -m mypkg.train      the RunResult as JSON
    memlab profile --snapshot p.pkl -- python train.py  a memory_viz snapshot (always on CUDA)

The script runs in a worker process (the runner's), unchanged: phases are found from PyTorch's
hooks (forward, backward, optimizer step; `memlab.phase("…")` for your own), every storage is
categorised, and the peak is shown with what was live there and its file:line. A script that
raises, exits early or runs past --timeout still gives a result: what was measured until then.
Its own output is shown as it runs (on stderr, after "│ ").
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from lab.commands import UsageError, gpu_memory_arg, seconds_arg


def add_parser(sub) -> None:
    p = sub.add_parser("profile", help="run your own training script under the lab's tracker: "
                                       "phases, categories, the peak and its file:line")
    p.add_argument("--mode", default="auto", choices=["auto", "cuda", "cpu", "sim"],
                   help="auto: cuda when a GPU is present, else cpu; cpu: a real run on this "
                        "CPU; sim: not yet (says why)")
    p.add_argument("--timeout", type=seconds_arg, default=None, metavar="S",
                   help="stop the script after S seconds (from its start; default 3600); what "
                        "ran until then is the result")
    p.add_argument("--snapshot", metavar="FILE",
                   help="write a memory snapshot (pytorch.org/memory_viz, memlab view); on "
                        "CUDA one is written by default: memlab-profile-<script>.pkl")
    p.add_argument("--no-snapshot", action="store_true", help="no snapshot, on CUDA either")
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help="a smaller virtual GPU: the script runs out of memory above it")
    p.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="storages live at the peak to list (default 10)")
    p.add_argument("--quiet", action="store_true", help="do not echo the script's output")
    p.add_argument("command", nargs="*", metavar="-- python SCRIPT.py ARGS",
                   help="the script and its arguments, after --")
    p.set_defaults(func=main)


def _mode(asked: str) -> str:
    from lab.profile.script import SIM_REFUSED

    if asked == "sim":
        raise UsageError(f"--mode sim: {SIM_REFUSED}")
    if asked == "cpu":
        return "cpu"
    from lab.measure.device import cuda_available

    gpu = cuda_available()
    if asked == "cuda" and not gpu:
        raise UsageError("--mode cuda needs a CUDA GPU and none is visible to PyTorch; "
                         "use --mode cpu")
    return "cuda" if gpu else "cpu"


class _Echo(threading.Thread):
    """Shows the script's output as it grows (the worker writes it to a file)."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.stop, self.pos, self.partial = path, threading.Event(), 0, ""

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
        for line in lines if not final else [x for x in lines if x]:
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
    gpu_memory = gpu_memory_arg(args.gpu_memory)
    mode = _mode(args.mode)
    snapshot = args.snapshot
    if snapshot is None and mode == "cuda" and not args.no_snapshot:
        snapshot = f"memlab-profile-{Path(cmd.label).stem.replace('.', '-')}.pkl"
    if snapshot:
        from lab.commands.run import check_writable_file

        snapshot = str(check_writable_file(snapshot, "--snapshot").resolve())
    return _profile(args, cmd, mode, snapshot, gpu_memory)


def _profile(args, cmd, mode: str, snapshot: str | None, gpu_memory: int | None) -> int:
    from lab.profile.run import DEFAULT_TIMEOUT_S, run_profile
    from lab.runner.client import SubprocessRunner

    why = "asked for" if args.mode != "auto" else ("a CUDA GPU is present" if mode == "cuda"
                                                   else "no CUDA GPU here")
    print(f"memlab: profiling {cmd.label} in mode {mode} ({why}); the script runs in a worker",
          file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="memlab-profile-") as tmp:
        out = Path(tmp) / "output.txt"
        out.touch()
        echo = _Echo(out) if not args.quiet else None
        if echo:
            echo.start()
        started = time.perf_counter()
        try:
            r = run_profile(cmd, SubprocessRunner(), mode,
                            timeout_s=args.timeout or DEFAULT_TIMEOUT_S, snapshot=snapshot,
                            output_path=str(out), gpu_memory=gpu_memory)
        finally:
            if echo:
                echo.stop.set()
                echo.join(timeout=2)
    print(f"memlab: {cmd.label} {r.status} after {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    if args.json:
        print(json.dumps(r.to_dict(), indent=1))
    else:
        from lab.profile.text import render

        print(render(r, top=args.top))
    return 0 if r.status == "ok" else 1
