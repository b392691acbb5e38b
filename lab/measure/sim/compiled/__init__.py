"""Sim's estimate of a compiled script's memory (issue 41): `torch.compile` regions traced with
Dynamo and AOTAutograd on fake tensors, partitioned as Inductor partitions them, and run with the
buffers Inductor would allocate (capture.py, fusion.py, runner.py; stats.py: what it saw). An
estimate, said as one. The package imports nothing: capture.py imports Dynamo (seconds), only
the estimate pass needs it."""
