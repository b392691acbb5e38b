"""Run a script with `torch.backends.cudnn.benchmark` pinned to False, whatever it sets.

    python pinned_benchmark.py SCRIPT.py ARGS...

What `conv_workspace.py trace --benchmark off` does on the GPU (`pin_benchmark`), as a script,
so that `memlab profile --mode sim -- python pinned_benchmark.py SCRIPT.py ARGS` predicts the
same run (bench/conv_workspace_rules.py --cases). No lab code.
"""

from __future__ import annotations

import runpy
import sys

import torch


def pin_benchmark(value: bool) -> None:
    """Make `torch.backends.cudnn.benchmark = X` in the script a no-op, pinned to `value`."""
    torch.backends.cudnn.benchmark = value
    type(torch.backends.cudnn).benchmark = property(lambda self: value, lambda self, v: None)


def main() -> None:
    pin_benchmark(False)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
