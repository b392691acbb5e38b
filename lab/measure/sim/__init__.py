"""The simulator (sim mode): fake tensors taking CUDA's code paths, and a model of the caching
allocator. The sim backend (lab.measure.backends.sim) puts it together; nothing here imports the
backends, the session or the measuring above them (pyproject's import contracts).

Where a change goes:

- allocator/: how the caching allocator places bytes (segments, blocks, settings, OOM);
- kernels/: where CUDA's code takes another path than the CPU's, and allocates differently;
- dispatch/: what sim does at each op (the tracker's policy, the fake tensor mode's fast path);
- facade/: a user's own CUDA script in sim (torch.cuda, `cuda` tensors, library calls);
- ranks: many ranks in one process (the fake process group: DDP, FSDP2);
- dtensor: DTensor's sharding of a foreach op (Adam over FSDP2's shards), once per kind;
- gpus: the cards sim can stand for, as data (a row per card);
- patches: a table of torch attributes replaced for a run and restored as one unit;
- ports: what upstream code each module follows, and the version read;
- versions: which torch/transformers sim was checked on, and the notes a result carries.

Import the modules themselves; this package's import is light (torch-free), so that the GPU
table (`lab.measure.sim.gpus`) answers the CLI's argument checks without importing torch.
"""

__all__ = ["allocator", "dispatch", "dtensor", "facade", "gpus", "kernels", "patches", "ports",
           "ranks", "versions"]
