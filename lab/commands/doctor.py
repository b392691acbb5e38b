"""`memlab doctor`: what this machine gives the lab (python, torch, CUDA, driver, GPU, NVML);
`memlab doctor --validate`: run the lab on the installed torch and transformers and say, per
library, whether the numbers stayed the same (lab.dev.validate)."""

from __future__ import annotations

import importlib.metadata as md
import json
import platform
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="check python, torch, CUDA, the GPU and NVML")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--validate", action="store_true",
                   help="run every lesson variant in sim on the installed torch and transformers "
                        "and compare with the validated versions' numbers (about 3 minutes)")
    p.set_defaults(func=main)


def _version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def collect() -> dict:
    import torch

    from lab.measure.cuda_allocator import nvml_used_bytes
    from lab.measure.device import cuda_available, gpu_info

    info: dict = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda_build": torch.version.cuda,
        "transformers": _version("transformers"),
        "textual": _version("textual"),
        "plotext": _version("plotext"),
        "cuda_available": cuda_available(),
    }
    gpu = gpu_info()
    if gpu:
        info.update(gpu=gpu.name, gpu_total_bytes=gpu.total_bytes, gpu_free_bytes=gpu.free_bytes,
                    gpu_count=torch.cuda.device_count())
        try:
            import pynvml

            pynvml.nvmlInit()
            info["driver"] = pynvml.nvmlSystemGetDriverVersion()
            pynvml.nvmlShutdown()
        except Exception:
            info["driver"] = None
        info["nvml_used_bytes"] = nvml_used_bytes()
        info["nvml"] = info["nvml_used_bytes"] is not None
    info["lab_modes"] = (["cuda", "cpu", "sim"] if gpu else ["cpu", "sim"])
    info["validated"] = validated()
    return info


def validated() -> dict:
    """Per library: the validated range (lab/measure/versions.json) and, for the installed
    version, why it is validated here or what to do ("" when it is in the range)."""
    from lab.measure import versions as V

    out = {}
    for name in V.LIBRARIES:
        floor, top = V.validated_range(name)
        v = V.installed(name) or ""
        mine = V.validated_here(name, v) if v else None
        if not v or V.in_range(name, v):
            status = ""
        elif mine and mine.get("outcome") in V.PASSED:
            status = f"validated here ({mine.get('summary', '')}, {mine.get('date', '')[:10]})"
        else:
            status = V.unvalidated(name, v) or ""
        out[name] = {"range": f"{floor}-{top}", "installed": v, "status": status}
    return out


def main(args) -> int:
    if args.validate:
        from lab.commands.validate import validate_main

        return validate_main(args)
    from lab.report import capacity, format_bytes, key_values

    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    rows = [
        ("python", info["python"]), ("platform", info["platform"]),
        ("torch", f"{info['torch']} (CUDA build: {info['torch_cuda_build'] or 'none, CPU only'})"),
        ("transformers", info["transformers"]), ("textual", info["textual"]),
        ("plotext", info["plotext"]),
    ]
    for name, v in info["validated"].items():
        rows.append((f"{name} validated", v["range"] + (f"; {v['status']}" if v["status"] else
                                                         f": {v['installed']} is in the range")))
    if info["cuda_available"]:
        rows += [
            ("GPU", f"{info['gpu']} × {info['gpu_count']}"),
            ("GPU memory", f"{capacity(info['gpu_total_bytes'])} total (PyTorch's messages "
                           f"say GiB), {format_bytes(info['gpu_free_bytes'])} free"),
            ("driver", info["driver"] or "unknown (NVML not available)"),
            ("NVML", "yes" if info["nvml"] else "no (nvidia-smi numbers unavailable)"),
        ]
    else:
        rows.append(("GPU", "no CUDA GPU visible to PyTorch"))
    print(key_values(rows))
    if info["cuda_available"]:
        print("\nThe lab runs real CUDA experiments (auto picks mode cuda), plus cpu and sim.")
    else:
        print("\nNo CUDA GPU: auto simulates the full-size runs (mode sim, exact tensor bytes) "
              "and shows the runs recorded on an NVIDIA H200 beside them; --mode cpu --scale "
              "small runs real CPU experiments in seconds.")
    return 0
