"""Run a training script unmodified in this process, then print its CUDA allocator peaks.

    python peak_of.py [--cap-gib G] -- SCRIPT.py ARGS...

The script runs as `python SCRIPT.py ARGS` would (runpy, `__main__`, its folder on sys.path,
the current folder unchanged). After it ends (or raises), one line `GT_RESULT {json}`:
max_memory_allocated / max_memory_reserved, the allocator's retry and OOM counts (a retry means
the cache was flushed under pressure, so the reserved peak is not a clean one), the status
(ok / oom / error), the card, and the versions (torch, cuDNN, transformers and the optional
libraries a zoo script may import: peft, pytorch-lightning, accelerate). `--cap-gib` caps this process with
`torch.cuda.set_per_process_memory_fraction` (the fit cases). No lab code: this is the ground
truth's own measuring stick.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
import runpy
import sys

MARK = "GT_RESULT "
GiB = 2**30
# result key -> distribution: the libraries whose version a number depends on
OPTIONAL = {"transformers": "transformers", "peft": "peft",
            "pytorch_lightning": "pytorch-lightning", "accelerate": "accelerate"}


def main(argv: list[str]) -> int:
    cap = None
    if argv[:1] == ["--cap-gib"]:
        cap, argv = float(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: peak_of.py [--cap-gib G] -- SCRIPT.py ARGS", file=sys.stderr)
        return 2
    import torch

    if cap is not None:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap * GiB / total))
    path = os.path.abspath(argv[0])
    sys.argv = [path, *argv[1:]]
    sys.path.insert(0, os.path.dirname(path))
    out = {"status": "ok"}
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            out.update(status="error", error=f"exit code {e.code}")
    except torch.OutOfMemoryError as e:
        out.update(status="oom", error=str(e).strip().splitlines()[0][:300])
    except Exception as e:  # noqa: BLE001 - a failed case is a row, not a crash of the bench
        out.update(status="error", error=f"{type(e).__name__}: {str(e).strip()[:300]}")
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        out.update(max_allocated=torch.cuda.max_memory_allocated(),
                   max_reserved=torch.cuda.max_memory_reserved(),
                   num_alloc_retries=stats.get("num_alloc_retries", 0),
                   num_ooms=stats.get("num_ooms", 0), gpu=torch.cuda.get_device_name(0),
                   total_bytes=torch.cuda.get_device_properties(0).total_memory)
    out["torch"] = torch.__version__
    out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    for name, dist in OPTIONAL.items():  # what the process would import (PYTHONPATH included)
        mod = sys.modules.get(name)
        try:
            out[name] = getattr(mod, "__version__", None) or metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["imported"] = sorted(n for n in OPTIONAL if n in sys.modules)
    print(MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
