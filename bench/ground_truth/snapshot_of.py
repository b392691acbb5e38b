"""Run a training script unmodified under the CUDA allocator's history, then dump its snapshot.

    python snapshot_of.py OUT.pkl -- SCRIPT.py ARGS...

For looking into a case where sim and the H200 disagree: the snapshot (what
`torch.cuda.memory._dump_snapshot` writes; `memlab view` and pytorch.org/memory_viz read it)
shows every allocation with its Python stack. No lab code, like peak_of.py.
"""

from __future__ import annotations

import os
import runpy
import sys


def run_script(argv: list[str]) -> None:
    """Run `SCRIPT ARGS...` in this process as `python SCRIPT ARGS` would: runpy, `__main__`,
    its folder first on sys.path, the current folder unchanged."""
    path = os.path.abspath(argv[0])
    sys.argv = [path, *argv[1:]]
    sys.path.insert(0, os.path.dirname(path))
    runpy.run_path(path, run_name="__main__")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: snapshot_of.py OUT.pkl -- SCRIPT.py ARGS", file=sys.stderr)
        return 2
    out, argv = argv[0], argv[2:]
    import torch

    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    try:
        run_script(argv)
    finally:
        torch.cuda.synchronize()
        torch.cuda.memory._dump_snapshot(out)
        print(f"snapshot_of: {out}; max allocated {torch.cuda.max_memory_allocated()}, "
              f"max reserved {torch.cuda.max_memory_reserved()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
