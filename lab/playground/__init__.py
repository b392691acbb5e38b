"""The playground: one workload, any set of technique combinations, measured side by side.

    techniques  `bf16+ckpt+accum4` -> Techniques (headless)
    workloads   name, sizes, step(run, techniques); the registry and its merge hook (headless)
    compare     ComparePlan -> one worker per combination -> Comparison (rows + results)
    fit         the largest batch that fits a GPU size: sim prediction, CUDA confirmation
    experiment  the generic experiment file the workers import (torch)
    training    the training loop with technique switches (torch)
    models      the linear and MLP workloads (torch)

Everything imported here is headless (no torch, no Textual); the app's screen is
lab/tui/screens/playground.py.
"""

from .compare import ComparePlan, Comparison, Row, run_compare
from .fit import FitResult, Probe, confirm, fit_all, search
from .techniques import ComboError, Techniques, parse_combo, parse_combos
from .workloads import Workload, all_workloads, get_workload, parse_sizes, register

__all__ = ["ComboError", "ComparePlan", "Comparison", "FitResult", "Probe", "Row", "Techniques",
           "Workload", "all_workloads", "confirm", "fit_all", "get_workload", "parse_combo",
           "parse_combos", "parse_sizes", "register", "run_compare", "search"]
