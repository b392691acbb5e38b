"""The practitioner zoo's comparison: sim on every case against its GPU recording, as tables.

    python bench/profile_vs_h200.py --suite zoo [--half held_out] [--only 'zoo/cnn/*']
        [--markdown docs/ACCURACY.md] [--json rows.json] [--jobs N]

Each case of cases.zoo_cases() runs as a user runs it, `memlab profile --mode sim --gpu CARD
--json -- python SCRIPT ARGS`, CARD being the card its recording in
assets/ground_truth/zoo_gpu.json names (h100 when it has none yet). A case without a recording
still runs: its row says what sim did (ran, refused in one line, crashed), which is the baseline
before any number exists.

Targets (issue 37, held-out half): every script runs to the end in sim, a one-line refusal
counting as a miss; max allocated within 1 % and max reserved within 3 %, except where a gap is
known and explained (LOOSE: CNNs, whose cuDNN workspaces and algorithm search follow rules measured
on one card, and whose reserved memory depends on where the allocator puts those large blocks,
and MoE layers looped by hand, whose routing depends on values), which are judged within 5 % in
a table of their own. The tables are Markdown, so the same text goes to the terminal and into
docs/ACCURACY.md between its markers (`--markdown`).
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from cases import ZOO_CATEGORIES, ZOO_RESULTS, Case, zoo_cases

STRICT = (0.01, 0.03)  # max allocated, max reserved
LOOSE_TOL = (0.05, 0.05)
# id globs judged at LOOSE_TOL, and why (the gap each row's note names)
LOOSE = {"zoo/cnn/*": "cuDNN's workspaces and its benchmark search follow rules measured on the "
                      "H100, not cuDNN's own sizes, and reserved memory can turn on a few KiB "
                      "of them",
         "zoo/moe/loop-*": "experts looped by hand: each expert's token count depends on the "
                           "router's values"}
BEGIN, END = "<!-- zoo-table:begin -->", "<!-- zoo-table:end -->"
CARDS = {"H100": "h100", "H200": "h200", "A100-SXM4-40GB": "a100-40gb", "A100 80GB": "a100-80gb",
         "L4": "l4", "T4": "t4", "RTX 4090": "rtx4090"}


def card_key(name: str | None) -> str:
    """torch.cuda.get_device_name() of a recording -> the sim preset (`--gpu`); h100 if none."""
    for mark, key in CARDS.items():
        if name and mark in name:
            return key
    return "h100"


def loose_reason(case_id: str) -> str | None:
    return next((why for glob, why in LOOSE.items() if fnmatch.fnmatch(case_id, glob)), None)


def outcome(r: dict) -> str:
    """ran | refused (one line naming the op and file:line) | crashed | oom | timeout."""
    st = r.get("status")
    if st in ("ok", "oom", "timeout"):
        return {"ok": "ran"}.get(st, st)
    return "refused" if "not supported in sim" in (r.get("error") or "") else "crashed"


def tiny_args(case: Case, mode: str) -> list[str]:
    """The case's tiny arguments; in sim without `--device cpu`, so the tiny script runs on the
    simulated card (the suite's one tiny case per category)."""
    args = list(case.tiny)
    if mode == "sim" and "--device" in args:
        i = args.index("--device")
        del args[i:i + 2]
    return args


def pct(pred, truth) -> float | None:
    return None if pred is None or not truth else pred / truth - 1


def compare(case: Case, truth: dict | None, run_profile, mode: str, tiny: bool) -> dict:
    card = card_key((truth or {}).get("gpu"))
    r = run_profile(case, tiny_args(case, mode) if tiny else case.args, mode, gpu=card)
    both = bool(truth) and truth.get("status") == "ok" and r.get("status") == "ok"
    return {"id": case.id, "half": None, "category": case.category, "card": card,
            "loose": loose_reason(case.id), "recorded": bool(truth),
            "gpu_status": (truth or {}).get("status"), "gpu_name": (truth or {}).get("gpu"),
            "gpu_alloc": (truth or {}).get("max_allocated"),
            "gpu_reserved": (truth or {}).get("max_reserved"),
            "sim_status": r.get("status"), "outcome": outcome(r), "exit": r.get("exit"),
            "sim_alloc": r.get("allocated"), "sim_reserved": r.get("reserved"),
            "err_alloc": pct(r.get("allocated"), (truth or {}).get("max_allocated")) if both
            else None,
            "err_reserved": pct(r.get("reserved"), (truth or {}).get("max_reserved")) if both
            else None,
            "seconds": r.get("seconds"), "error": _one_line(r.get("error")),
            "sim_torch": r.get("torch"), "sim_transformers": r.get("transformers")}


def _one_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return re.sub(r"\s+", " ", line)[:110].replace("|", "\\|")


def _gb(x) -> str:
    return "—" if x is None else f"{x / 1e9:.3f}"


def _pct(x) -> str:
    return "—" if x is None else f"{x * 100:+.2f} %"


def _mark(err, tol) -> str:
    return "" if err is None else (" ✓" if abs(err) <= tol else " ✗")


def table(rows: list[dict]) -> str:
    head = ("| case | GPU max alloc GB | sim | Δ | GPU max reserved GB | sim | Δ | sim run | s |\n"
            "|---|---:|---:|---:|---:|---:|---:|---|---:|")
    lines = [head]
    for r in rows:
        ta, tr = LOOSE_TOL if r["loose"] else STRICT
        run = r["outcome"] + (f": {r['error']}" if r["outcome"] != "ran" and r["error"] else "")
        if not r["recorded"]:
            run += " (not recorded yet)"
        elif r["gpu_status"] != "ok":
            run += f" (GPU run: {r['gpu_status']})"
        card = f" ({r['card'].upper()})" if r["recorded"] else ""  # the card both sides name
        lines.append(f"| {r['id'][4:]}{card} | {_gb(r['gpu_alloc'])} | {_gb(r['sim_alloc'])} | "
                     f"{_pct(r['err_alloc'])}{_mark(r['err_alloc'], ta)} | "
                     f"{_gb(r['gpu_reserved'])} | {_gb(r['sim_reserved'])} | "
                     f"{_pct(r['err_reserved'])}{_mark(r['err_reserved'], tr)} | {run} | "
                     f"{r['seconds'] if r['seconds'] is not None else '—'} |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    """One line per half: how many ran to the end, how many met their targets."""
    if not rows:
        return "nothing run"
    ran = sum(r["outcome"] == "ran" for r in rows)
    refused = sum(r["outcome"] == "refused" for r in rows)
    parts = [f"ran to the end in sim: {ran} of {len(rows)}"
             + (f" ({refused} refused in one line)" if refused else "")]
    for name, pick, (ta, tr) in (("transformer-style", lambda r: not r["loose"], STRICT),
                                 ("CNN / looped MoE", lambda r: r["loose"], LOOSE_TOL)):
        judged = [r for r in rows if pick(r) and r["err_alloc"] is not None]
        total = sum(1 for r in rows if pick(r))
        if not total:
            continue
        a = sum(abs(r["err_alloc"]) <= ta for r in judged)
        b = sum(abs(r["err_reserved"]) <= tr for r in judged)
        parts.append(f"{name}: allocated within {ta:.0%} on {a}, reserved within {tr:.0%} on "
                     f"{b}, of {total} ({total - len(judged)} without both numbers)")
    return "; ".join(parts)


def versions_line(doc: dict, rows: list[dict]) -> str:
    runs = [r for r in doc.get("runs", []) if not r.get("dry_run")]
    cards = sorted({r["gpu_name"] for r in rows if r.get("gpu_name")})
    libs = {}
    for run in runs:
        libs.update({"transformers": run.get("transformers_carried"),
                     **(run.get("libraries") or {})})
    gpu = (f"GPU: {', '.join(cards)}, torch {', '.join(sorted({r['torch'] for r in runs}))}, "
           + ", ".join(f"{k} {v}" for k, v in libs.items() if v)) if runs else \
        "GPU: not recorded yet"
    sim_t = next((r for r in rows if r.get("sim_torch")), {})
    here = []
    for dist in ("peft", "pytorch-lightning", "accelerate"):
        try:
            here.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            here.append(f"{dist} not installed")
    sim = (f"sim: torch {sim_t.get('sim_torch')}, transformers {sim_t.get('sim_transformers')}, "
           + ", ".join(here))
    return f"{gpu}\n\n{sim}"


def report(doc: dict, rows: list[dict], command: str) -> str:
    out = [f"Made by `{command}`; the recordings by `bench/ground_truth/run_h200.py --suite zoo` "
           "(one fresh process per case, the script's own `torch.cuda.max_memory_allocated()` / "
           "`max_memory_reserved()`).", "", versions_line(doc, rows)]
    for half, title in (("tune", "Tune half (the simulator may be tuned on these)"),
                        ("held_out", "Held-out half (fixed 2026-12-07 before any number; judged)")):
        part = [r for r in rows if r["half"] == half]
        if not part:
            continue
        out += ["", f"### {title}", "", f"**{summary(part)}**"]
        for cat in ZOO_CATEGORIES:
            strict = [r for r in part if r["category"] == cat and not r["loose"]]
            loose = [r for r in part if r["category"] == cat and r["loose"]]
            if strict:
                out += ["", f"#### {cat}", "", table(strict)]
            if loose:
                why = sorted({r["loose"] for r in loose})
                out += ["", f"#### {cat} (judged within 5 %: {'; '.join(why)})", "", table(loose)]
    return "\n".join(out)


def write_markdown(path: Path, text: str) -> None:
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers to write between")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main_zoo(args, run_profile) -> int:
    from cases import load_split

    truth_path = args.truth or ZOO_RESULTS
    doc = json.loads(truth_path.read_text()) if truth_path.exists() else {"cases": {}}
    split = load_split()
    cases = zoo_cases()
    if args.only:
        cases = [c for c in cases if any(fnmatch.fnmatch(c.id, g) for g in args.only.split(","))]
    if args.half:
        cases = [c for c in cases if split[c.group] == args.half]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda c: compare(c, doc["cases"].get(c.id), run_profile, args.mode,
                                               args.tiny), cases))
    for r, c in zip(rows, cases):
        r["half"] = split[c.group]
    command = "python bench/profile_vs_h200.py --suite zoo" + (" --tiny" if args.tiny else "") \
        + (f" --mode {args.mode}" if args.mode != "sim" else "")
    text = report(doc, rows, command)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        if args.only or args.half or args.tiny or args.mode != "sim":
            print("profile_vs_h200: --markdown writes only a full sim run (no --only, --half, "
                  "--tiny, --mode cpu)", file=sys.stderr)
            return 2
        write_markdown(args.markdown, text)
        print(f"profile_vs_h200: the tables are in {args.markdown}", file=sys.stderr)
    return 0


__all__ = ["card_key", "compare", "loose_reason", "main_zoo", "outcome", "report", "summary",
           "table", "write_markdown"]
