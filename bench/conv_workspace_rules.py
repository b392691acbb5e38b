"""Sim's cuDNN workspace rules against the GPU's measured convolutions, tune and held-out rows.

    python bench/conv_workspace_rules.py [--all]
    python bench/conv_workspace_rules.py --cases     # the zoo's CNN cases end to end

Reads assets/ground_truth/cnn_workspace_gpu.json (`conv_workspace.py table` on the H100: each
convolution of the zoo's CNN cases alone, the allocator's peak above its tensors per direction)
and prints, per row and direction, the search's block (benchmark on, first call) and the plan's
workspace (benchmark off) measured and predicted by lab.measure.sim.kernels.cudnn_conv. The
rules' constants were fitted on the tune half's rows (split.toml); the held-out rows judge them.
Rows of a direction a training step never runs (the first layer's grad-input) are left out
unless --all. A summary per half: how many rows within 10 % or 16 MiB, and the worst miss.

--cases runs each zoo CNN case in sim (`memlab profile --mode sim --gpu CARD --json`, a fresh
process each, on the card its recording names) as written and with `cudnn.benchmark` pinned off
(bench/ground_truth/pinned_benchmark.py, as the GPU trace pinned it), and prints docs/ACCURACY.md's end-to-end table
against the GPU's numbers (assets/ground_truth/zoo_gpu.json; the pinned-off ones from the traces
in cnn_workspace_gpu.json).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from lab.measure.sim.kernels.cudnn_conv import (  # noqa: E402
    CONVOLUTION, CONVOLUTION_BACKWARD, GRAD_INPUT, calls, plan_workspace, search_workspace)

sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))
from zoo_report import card_key  # noqa: E402

MiB = 2**20
TUNE = {"cnn/resnet50-fp32", "cnn/resnet50-bf16-cl"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _out_shape(row: dict) -> list[int]:
    (n, _, h, w), (k, c, kh, kw) = row["x"], row["w"]
    (sh, sw), (ph, pw) = row["stride"], row["padding"]
    if row["kind"] == "conv_transpose2d":
        return [n, c, (h - 1) * sh + kh - 2 * ph, (w - 1) * sw + kw - 2 * pw]
    return [n, k, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1]


def convolutions(row: dict):
    """(direction, Convolution) for each direction of the row's convolution, read by sim's own
    `calls` from meta tensors of the row's shapes and layout (what sim sees in a run)."""
    fmt = torch.channels_last if row["channels_last"] else torch.contiguous_format
    x, y, w = (torch.empty(shape, dtype=DTYPES[row["dtype"]], device="meta", memory_format=fmt)
               for shape in (row["x"], _out_shape(row), row["w"]))
    transposed = row["kind"] == "conv_transpose2d"
    conv = (row["stride"], row["padding"], [1, 1], transposed, [0, 0], 1)
    (forward,), _ = calls(CONVOLUTION, (x, w, None, *conv), {}, y)
    (grad_input,), _ = calls(CONVOLUTION_BACKWARD, (y, x, w, None, *conv, [True, False, False]),
                             {}, None)
    (grad_weight,), _ = calls(CONVOLUTION_BACKWARD, (y, x, w, None, *conv, [False, True, False]),
                              {}, None)
    return [("forward", forward), ("grad_input", grad_input), ("grad_weight", grad_weight)]


def cnn_cases() -> list[tuple[str, str, str]]:
    """(case, half, script and arguments under bench/ground_truth) of the zoo's CNN cases, as
    bench/ground_truth/cases.py and split.toml name them."""
    from cases import half_of, load_split, zoo_cases

    split = load_split()
    return [(c.id.removeprefix("zoo/"), half_of(c, split).replace("_", " "),
             f"zoo/{Path(c.script).name} {' '.join(c.args)}")
            for c in zoo_cases() if c.id.startswith("zoo/cnn/")]


def _sim(script_args: str, pinned_off: bool, card: str = "h100") -> tuple[int, int]:
    gt = ROOT / "bench" / "ground_truth"
    argv = [str(gt / a) if a.endswith(".py") else a for a in script_args.split()]
    if pinned_off:
        argv = [str(gt / "pinned_benchmark.py"), *argv]
    out = subprocess.run([sys.executable, "-m", "lab", "profile", "--mode", "sim", "--gpu", card,
                          "--json", "--quiet", "--", "python", *argv], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    alloc = json.loads(out)["allocator"]
    return alloc["peak_allocated_bytes"], alloc["peak_reserved_bytes"]


def cases_table(record: dict) -> None:
    zoo = json.loads((ROOT / "assets/ground_truth/zoo_gpu.json").read_text())["cases"]
    pct = (lambda sim, gpu: f"{(sim - gpu) / gpu * 100:+.2f} %".replace("-", "−"))
    print("| case | GPU max allocated | sim | GPU max reserved | sim | GPU, off: allocated / "
          "reserved | sim, off |\n|---|---:|---:|---:|---:|---:|---:|")
    for case, half, script in cnn_cases():
        gpu = zoo.get(f"zoo/{case}")
        if gpu is None or gpu.get("max_allocated") is None:
            print(f"| {case} ({half}) | not recorded yet | | | | | |")
            continue
        a, r = _sim(script, False, card_key(gpu.get("gpu")))
        off = next((t for t in record["traces"] if t["benchmark"] == "off"
                    and t["script"].endswith(script.split("/", 1)[1])), None)
        cells = ["", ""]
        if off:
            oa, orr = _sim(script, True, card_key(off.get("gpu")))
            cells = [f"{off['max_allocated'] / 1e9:.3f} / {off['max_reserved'] / 1e9:.3f}",
                     f"{oa / 1e9:.3f} / {orr / 1e9:.3f} ({pct(orr, off['max_reserved'])})"]
        print(f"| {case} ({half}) | {gpu['max_allocated'] / 1e9:.3f} GB | {a / 1e9:.3f} "
              f"({pct(a, gpu['max_allocated'])}) | {gpu['max_reserved'] / 1e9:.3f} GB | "
              f"{r / 1e9:.3f} ({pct(r, gpu['max_reserved'])}) | {cells[0]} | {cells[1]} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="also rows a training step never runs")
    ap.add_argument("--cases", action="store_true", help="the zoo's CNN cases end to end")
    ap.add_argument("--file", default=str(ROOT / "assets/ground_truth/cnn_workspace_gpu.json"))
    args = ap.parse_args(argv)
    data = json.loads(Path(args.file).read_text())
    if args.cases:
        cases_table(data)
        return 0
    print(f"{data['gpu']}, torch {data['torch']}, cuDNN {data['cudnn']} "
          f"(recorded {data['recorded']})\n")
    print(f"{'half':5s} {'case':22s} {'conv':44s} {'direction':11s} "
          f"{'search GPU':>10s} {'sim':>7s} {'plan GPU':>9s} {'sim':>7s}   MiB")
    tally = {}
    for row in data["convolutions"]:
        half = "tune" if row["case"] in TUNE else "held"
        first_layer = row["x"][1] == 3
        shape = (f"{row['kind'][4:] or 'conv'} x{row['x']} w{row['w'][:2]} k{row['w'][2]} "
                 f"s{row['stride'][0]}{' cl' if row['channels_last'] else ''}")
        for direction, conv in convolutions(row):
            if first_layer and direction == GRAD_INPUT and not args.all:
                continue
            above = row["above_tensors"]
            gpu_search, gpu_plan = (above[f"{direction}/benchmark/first"],
                                    above[f"{direction}/heuristic/first"])
            sim_search, sim_plan = search_workspace(conv), plan_workspace(conv)
            for what, gpu, sim in (("search", gpu_search, sim_search), ("plan", gpu_plan, sim_plan)):
                ok = abs(sim - gpu) <= max(0.10 * gpu, 16 * MiB)
                t = tally.setdefault((half, what), [0, 0, 0.0, ""])
                t[0] += ok
                t[1] += 1
                if abs(sim - gpu) / MiB > t[2]:
                    t[2], t[3] = abs(sim - gpu) / MiB, f"{row['case']} {shape} {direction}"
            mark = lambda g, s: " " if abs(s - g) <= max(0.10 * g, 16 * MiB) else "✗"
            print(f"{half:5s} {row['case']:22s} {shape:44s} {direction:11s} "
                  f"{gpu_search / MiB:10.0f} {sim_search / MiB:7.0f}{mark(gpu_search, sim_search)}"
                  f"{gpu_plan / MiB:9.0f} {sim_plan / MiB:7.0f}{mark(gpu_plan, sim_plan)}")
    print()
    for (half, what), (ok, n, worst, where) in sorted(tally.items()):
        print(f"{half:5s} {what:6s}: {ok}/{n} within 10 % or 16 MiB; worst miss {worst:,.0f} MiB "
              f"({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
