"""Sim's estimate of a compiled script's memory (issue 41): `torch.compile` regions traced with
Dynamo and AOTAutograd on fake tensors, partitioned as Inductor partitions them, and run with the
buffers Inductor would allocate (capture.py, fusion.py, runner.py). An estimate, said as one."""

from .capture import NOT_ESTIMATED_MODES, compile_for_estimate, supported
from .stats import CompileStats

__all__ = ["CompileStats", "NOT_ESTIMATED_MODES", "compile_for_estimate", "supported"]
