"""The playground: one workload, any set of technique combinations, measured side by side.

    compare     ComparePlan -> one worker per combination -> Comparison (rows + results)
    fit         the CUDA confirmation probe of `memlab fit` (a worker per try)
    text        comparison and fit tables as text

The workloads, combinations, training and the largest-batch search are the workload layer's
(`lab.workloads`); this package runs them through the runner. Headless (no torch, no Textual);
the app's screen is lab/tui/screens/playground.py.
"""

from .compare import ComparePlan, Comparison, Row, rows_for, run_compare, run_params
from .fit import runner_probe

__all__ = ["ComparePlan", "Comparison", "Row", "rows_for", "run_compare", "run_params",
           "runner_probe"]
