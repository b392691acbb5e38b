"""Run a script with `torch.backends.cudnn.benchmark` pinned to False, whatever it sets.

    python pinned_benchmark.py SCRIPT.py ARGS...

What `conv_workspace.py trace --benchmark off` did on the GPU, as a script of its own, so that
`memlab profile --mode sim -- python pinned_benchmark.py SCRIPT.py ARGS` predicts the same run
(bench/conv_workspace_rules.py --cases). No lab code.
"""

from __future__ import annotations

import runpy
import sys

import torch


def main() -> None:
    torch.backends.cudnn.benchmark = False
    type(torch.backends.cudnn).benchmark = property(lambda self: False, lambda self, v: None)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
