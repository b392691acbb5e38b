"""Which GPUs the runner service hands out, and how big they are — without touching CUDA.

The service must never create a CUDA context (its workers each make their own), so it asks
`nvidia-smi` (NVML underneath), honouring CUDA_VISIBLE_DEVICES given as indices or UUIDs.
Where there is a driver but no nvidia-smi, one child process asks torch. MEMLAB_RUNNER_GPUS
("141GB,141GB"; "" for none) sets the list by hand (tests, a GPU kept for something else).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

GPUS_ENV = "MEMLAB_RUNNER_GPUS"


@dataclass(frozen=True)
class VisibleGpu:
    """A GPU this machine shows the runner (not lab.measure.sim.gpus.Gpu, a card sim stands for)."""

    visible: str  # what CUDA_VISIBLE_DEVICES should say for a worker on this GPU
    total_bytes: int


def _from_env(text: str) -> list[VisibleGpu]:
    from lab.report.units import parse_size

    sizes = [s.strip() for s in text.split(",") if s.strip()]
    return [VisibleGpu(str(i), parse_size(s)) for i, s in enumerate(sizes)]


def _nvidia_smi() -> list[tuple[str, str, int]] | None:
    """(index, uuid, total bytes) per GPU, or None when nvidia-smi cannot tell."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=index,uuid,memory.total",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            rows.append((parts[0], parts[1], int(float(parts[2])) * 2**20))  # MiB
    return rows


def _torch_probe() -> list[VisibleGpu]:
    code = ("import json, torch; n = torch.cuda.device_count() if torch.cuda.is_available() else 0;"
            "print(json.dumps([torch.cuda.get_device_properties(i).total_memory for i in range(n)]))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        sizes = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return []
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return [VisibleGpu(visible[i] if i < len(visible) else str(i), int(b)) for i, b in enumerate(sizes)]


def visible_gpus() -> list[VisibleGpu]:
    if GPUS_ENV in os.environ:
        return _from_env(os.environ[GPUS_ENV])
    rows = _nvidia_smi()
    if rows is None:
        driver = Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists()
        return _torch_probe() if driver else []
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted is None:
        return [VisibleGpu(index, total) for index, _, total in rows]
    out = []
    for v in (v.strip() for v in wanted.split(",")):
        if not v:
            continue
        for index, uuid, total in rows:
            if v == index or (v.startswith("GPU-") and uuid.startswith(v)):
                out.append(VisibleGpu(v, total))
                break
        else:
            break  # CUDA stops at the first entry it cannot resolve
    return out


def describe_first() -> tuple[str, int, int] | None:
    """(name, total bytes, free bytes) of the first GPU this process would see, from nvidia-smi:
    no CUDA context, so an app (a served tab, forty of them in a workshop) holds no GPU memory
    for merely asking. None when nvidia-smi cannot tell (the caller may then ask torch)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=index,uuid,name,memory.total,memory.free",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [[p.strip() for p in line.split(",")] for line in out.splitlines()]
    rows = [r for r in rows if len(r) == 5 and r[0].isdigit()]
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    first = (wanted or "").split(",")[0].strip() if wanted is not None else None
    for index, uuid, name, total, free in rows:
        if first is None or first == index or (first.startswith("GPU-") and uuid.startswith(first)):
            try:
                return name, int(float(total)) * 2**20, int(float(free)) * 2**20  # MiB
            except ValueError:
                return None
    return None
