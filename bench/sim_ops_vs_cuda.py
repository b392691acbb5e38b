"""Sim's op sequence against CUDA's, op by op (bench/probe_cuda.py's ops.jsonl.gz).

    python bench/sim_ops_vs_cuda.py [OPS.jsonl.gz] [--workload gpt2_bf16] [--show 40]

Runs each probe workload (2-layer GPT-2 / Qwen2 at full width; fp32, bf16, fp16, checkpointing,
eval modes) in sim with the same code as the probe, records every aten op with its outputs, and
aligns the sequence with the one recorded on the H200 (difflib on op name + output dtypes/shapes).
Prints per workload: ops on each side, matching ops, and the bytes of new outputs on each side;
`--show N` prints the first N differences. This is the check that sim takes CUDA's code paths.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT = Path("/work/coord/gpu-results/sim-1/ops.jsonl.gz")
SKIP = {"prim.device.default", "aten.detach.default", "aten._local_scalar_dense.default"}


def sim_ops(workload: str) -> list:
    """The probe's job_ops, in sim (CPU-device fake tensors, CUDA's paths)."""
    import bench.probe_cuda as probe
    from lab.measure.sim.dispatch.fake_mode import fake_mode
    from lab.measure.sim.dispatch.policy import CudaPaths
    from lab.measure.tracker import TensorTracker

    sink: list = []
    orig = probe.OpLog

    def oplog(cpu, s):  # the probe's recorder, pointed at our sink
        return orig(True, sink)

    probe.OpLog = oplog
    try:
        with fake_mode(), CudaPaths() as policy, TensorTracker(policy=policy):
            probe.job_ops(False, workload) if False else _run(probe, workload)
    finally:
        probe.OpLog = orig
    return sink


def _run(probe, workload):
    # job_ops with cpu=False sizes but the CPU device: patch the device helper
    orig_dev = probe._dev
    probe._dev = lambda cpu: __import__("torch").device("cpu")
    try:
        return probe.job_ops(False, workload)
    finally:
        probe._dev = orig_dev


def key(op) -> tuple:
    name, _thr, bwd, _ins, outs, *_ = op
    return (name, bwd, tuple((o[0], tuple(o[1])) for o in outs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ops", nargs="?", default=str(DEFAULT))
    ap.add_argument("--workload", action="append")
    ap.add_argument("--show", type=int, default=0)
    args = ap.parse_args()
    cuda = {}
    for line in gzip.open(args.ops, "rt"):
        d = json.loads(line)
        cuda[d["workload"]] = d["ops"]
    for w, ops in cuda.items():
        if w == "linear_threads" or (args.workload and w not in args.workload):
            continue
        sops = sim_ops(w)
        a = [key(o) for o in ops if o[0] not in SKIP]
        b = [key(o) for o in sops if o[0] not in SKIP]
        new_a = sum(x[2] for o in ops for x in o[4] if x[3])
        new_b = sum(x[2] for o in sops for x in o[4] if x[3])
        sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        same = sum(blk.size for blk in sm.get_matching_blocks())
        print(f"{w:24} cuda {len(a):5} ops, sim {len(b):5} ops, matching {same:5} "
              f"({same / max(len(a), 1) * 100:5.1f} % of CUDA's); bytes of new outputs: cuda "
              f"{new_a:,}, sim {new_b:,} ({(new_b - new_a) / max(new_a, 1) * 100:+.3f} %)")
        shown = 0
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal" or shown >= args.show:
                continue
            shown += 1
            print(f"   {tag:7} cuda[{i1}:{i2}] {[x[0][5:] + str(list(x[2])[:2]) for x in a[i1:i2]][:4]}")
            print(f"           sim[{j1}:{j2}] {[x[0][5:] + str(list(x[2])[:2]) for x in b[j1:j2]][:4]}")


if __name__ == "__main__":
    main()
