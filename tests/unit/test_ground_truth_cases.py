"""The ground-truth table (bench/ground_truth/cases.py) and its split: every case in exactly one
half, the promised breadth, no public code committed, and the comparison's fit search."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))
sys.path.insert(0, str(ROOT / "bench"))

import cases  # noqa: E402
import profile_vs_h200  # noqa: E402


def test_every_case_is_in_exactly_one_half_and_every_group_has_cases():
    split = cases.load_split()  # raises on a group in both halves
    table = cases.all_cases()
    halves = {c.id: cases.half_of(c, split) for c in table}  # raises on a group in neither
    assert set(halves.values()) == {"tune", "held_out", "versions"}
    used = {c.group for c in table + cases.zoo_cases()}
    assert set(split) <= used, f"split.toml names groups no case has: {set(split) - used}"
    assert len({c.id for c in table}) == len(table)


def test_breadth_twenty_architectures_four_scripts_and_configs_say_their_source():
    table = cases.all_cases()
    types = set()
    for c in table:
        if c.kind == "hf":
            cfg = json.loads((ROOT / c.args[c.args.index("--config") + 1]).read_text())
            types.add(cfg["model_type"])
            if "bench/ground_truth/configs" in c.args[1]:
                assert cfg["_source"].startswith("huggingface.co/"), c.id
    assert len(types) >= 20, sorted(types)
    scripts = {c.script for c in table if c.kind == "script"}
    assert len(scripts) >= 4
    assert {c.script.split("/")[0] for c in table if c.info.get("source")} == {".gt_scripts"}
    for name, src in cases.SOURCES.items():
        assert len(src["commit"]) == 40, name  # a named commit, not a branch


def test_public_scripts_are_never_committed():
    tracked = subprocess.run(["git", "ls-files", ".gt_scripts", ".whl"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert tracked == ""


def test_fit_search_starts_at_the_h200s_answer_and_finds_sims(monkeypatch):
    [case] = [c for c in cases.all_cases() if c.id == "fit/gpt2/fp32"]
    assert cases.with_batch(case, 7)[case.args.index("--batch") + 1] == "7"
    for sim_largest, h200, expect_probes in [(5, 5, {5, 6}), (7, 5, {5, 6, 12, 9, 7, 8}),
                                             (3, 5, {5, 4, 3})]:
        seen = []

        def fake(c, args, mode, gpu_memory=None, sim_largest=sim_largest):
            b = int(args[args.index("--batch") + 1])
            seen.append(b)
            assert gpu_memory == "16GiB"
            return {"status": "ok" if b <= sim_largest else "oom"}

        monkeypatch.setattr(profile_vs_h200, "run_profile", fake)
        f = profile_vs_h200.fit_sim(case, {"cap_gib": 16, "largest_batch": h200}, "sim")
        assert f["largest_batch"] == sim_largest
        assert set(seen) == expect_probes and len(seen) == len(set(seen))


def test_summary_counts_the_bars():
    rows = [{"id": "a", "kind": "hf", "judged": True, "err_alloc": 0.004, "err_reserved": 0.02},
            {"id": "b", "kind": "hf", "judged": True, "err_alloc": -0.02, "err_reserved": 0.06},
            {"id": "c", "kind": "script", "judged": False, "err_alloc": 0.5, "err_reserved": 0.5},
            {"id": "f", "kind": "fit", "h200_batch": 8, "sim_batch": 9}]
    s = profile_vs_h200.summary(rows, "held_out")
    assert s == ("held_out: allocated within 1 % on 1 of 2; reserved within 3 % on 1 of 2, worst "
                 "+6.00% (b), beyond 5 %: b; fit equal on 0 of 1, ABOVE the H200 on f")


def test_runner_fit_bisection_and_rerun_alone(monkeypatch):
    import run_h200

    [case] = [c for c in cases.all_cases() if c.id == "fit/gpt2/fp32"]
    GiB = 2**30

    def fake(c, args, *, cap_gib, dry):  # 3.5 GiB + 0.5 GiB a sample: 25 fit under 16 GiB
        b = int(args[args.index("--batch") + 1])
        peak = (7 + b) * GiB // 2
        return {"status": "ok" if peak <= cap_gib * GiB else "oom", "max_allocated": peak}

    monkeypatch.setattr(run_h200, "run_one", fake)
    r = run_h200.fit_case(case, run_h200.Gate(120), dry=False)
    assert (r["largest_batch"], r["first_oom_batch"], r["status"]) == (25, 26, "ok")
    assert [p["batch"] for p in r["probes"]] == [1, 2, 24, 25, 26]  # the line's guess, then done

    # a peak case that saw a cache flush (a retry) while another case ran is run again alone
    [peak] = [c for c in cases.all_cases() if c.id == "hf/gpt2/fp32"]
    monkeypatch.setattr(run_h200, "estimate_gib", lambda c: 10)
    calls = []

    def flaky(c, args, *, cap_gib, dry):
        calls.append(1)
        return {"status": "ok", "num_alloc_retries": 1 if len(calls) == 1 else 0}

    monkeypatch.setattr(run_h200, "run_one", flaky)

    class Busy(run_h200.Gate):  # someone else is always running
        def run(self, gib, fn, *args, alone=False, **kw):
            return fn(*args, **kw), not alone

    r = run_h200.peak_case(peak, Busy(120), dry=False)
    assert len(calls) == 2 and r["ran_alone"] and r["num_alloc_retries"] == 0


def test_the_zoo_covers_every_category_in_both_halves_split_before_any_number():
    import tomllib

    split = cases.load_split()
    zoo = cases.zoo_cases()
    halves = {c.id: cases.half_of(c, split) for c in zoo}
    assert len(zoo) >= 16 and len({c.id for c in zoo}) == len(zoo)
    for half in ("tune", "held_out"):
        assert sum(h == half for h in halves.values()) >= 8
        assert {c.category for c in zoo if halves[c.id] == half} == set(cases.ZOO_CATEGORIES)
    # the split's date is before every recorded zoo number
    [added] = [a for a in tomllib.loads(cases.SPLIT.read_text())["added"]
               if "zoo/cnn/resnet50-fp32" in a["tune"]]
    if cases.ZOO_RESULTS.exists():
        for rec in json.loads(cases.ZOO_RESULTS.read_text())["cases"].values():
            assert rec["recorded"][:10] >= added["date"], rec["id"]
    for c in zoo:  # plain scripts: none imports the lab; configs name where they came from
        src = (ROOT / c.script).read_text()
        assert "import lab" not in src and "from lab" not in src and "memlab" not in src, c.id
        if "--config" in c.args:
            name = c.args[c.args.index("--config") + 1]
            cfg = (ROOT / "bench/ground_truth/configs" / f"{name}.json")
            cfg = cfg if cfg.exists() else ROOT / "assets/models" / f"{name}.json"
            assert cfg.exists(), c.id
            if "configs" in str(cfg):
                assert json.loads(cfg.read_text())["_source"].startswith("huggingface.co/")


def test_the_zoo_report_judges_each_family_by_its_own_target_and_writes_between_markers(tmp_path):
    import zoo_report

    assert zoo_report.card_key("NVIDIA H100 80GB HBM3") == "h100"
    assert zoo_report.card_key("NVIDIA H200") == "h200" and zoo_report.card_key(None) == "h100"
    assert zoo_report.loose_reason("zoo/cnn/unet-bf16") and \
        zoo_report.loose_reason("zoo/moe/loop-fp32") and \
        not zoo_report.loose_reason("zoo/moe/qwen3-moe-bf16")
    assert zoo_report.outcome({"status": "error", "error": "not supported in sim: x at a.py:3"}) \
        == "refused"
    assert zoo_report.outcome({"status": "error", "error": "RuntimeError: y"}) == "crashed"
    row = {"outcome": "ran", "recorded": True, "gpu_status": "ok", "error": ""}
    rows = [{**row, "id": "zoo/vit/a", "loose": None, "err_alloc": 0.005, "err_reserved": 0.04},
            {**row, "id": "zoo/cnn/b", "loose": "cuDNN", "err_alloc": 0.04, "err_reserved": 0.04},
            {**row, "id": "zoo/moe/c", "loose": None, "outcome": "refused", "err_alloc": None,
             "err_reserved": None}]
    assert zoo_report.summary(rows) == (
        "ran to the end in sim: 2 of 3 (1 refused in one line); transformer-style: allocated "
        "within 1% on 1, reserved within 3% on 0, of 2 (1 without both numbers); CNN / looped "
        "MoE: allocated within 5% on 1, reserved within 5% on 1, of 1 (0 without both numbers)")
    doc = tmp_path / "A.md"
    doc.write_text(f"intro\n{zoo_report.BEGIN}\nold\n{zoo_report.END}\noutro\n")
    zoo_report.write_markdown(doc, "new table")
    assert doc.read_text() == f"intro\n{zoo_report.BEGIN}\nnew table\n{zoo_report.END}\noutro\n"
