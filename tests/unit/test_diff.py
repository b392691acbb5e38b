"""`memlab diff A B` (lab.snapshots.diff): results and snapshots compared at their peaks.

The bar (issue 14): two snapshots of the same training loop at batch 16 and at batch 2 give
`peak_delta_bytes` within 1 % of the true difference, at least half of it in activations. The
loop is lesson 03's own seed loop (`seed_loop_b16`, `seed_loop_b2`), run here on the CPU with
`--snapshot`-style profiles (the tracker's trace in memory_viz's format).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lab.snapshots.diff import SMALLER, diff_files, short_site

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "assets" / "reference"
H200 = ROOT / "tests" / "fixtures" / "h200_snapshot.pickle"
MiB = 2**20


def _cli(capsys, *argv):
    from lab.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _adds_up(d) -> None:
    """Every breakdown of each side adds up to its peak, so the deltas add up to the peak's."""
    for s in (d.a, d.b):
        assert sum(s.by_category.values()) == s.peak_bytes
        assert sum(s.by_phase.values()) == s.peak_bytes
        assert sum(s.sites.values()) == s.peak_bytes
    assert sum(d.by_category_delta.values()) == d.peak_delta_bytes
    assert sum(d.by_phase_delta.values()) == d.peak_delta_bytes


def test_two_recorded_results(capsys):
    # Given the H200 recordings of lesson 08 (fp32 baseline, bf16 autocast)
    a, b = REF / "mixed-precision" / "baseline.json", REF / "mixed-precision" / "bf16.json"
    ra, rb = (json.loads(p.read_text()) for p in (a, b))
    code, out, err = _cli(capsys, "diff", str(a), str(b), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["peak_delta_bytes"] == rb["peak"]["bytes"] - ra["peak"]["bytes"] < 0
    for cat in set(ra["peak"]["by_category"]) | set(rb["peak"]["by_category"]):
        want = rb["peak"]["by_category"].get(cat, 0) - ra["peak"]["by_category"].get(cat, 0)
        assert d["by_category_delta"].get(cat, 0) == want
    assert d["headline"].startswith("bf16 vs baseline: peak −")
    deltas = [abs(s["delta_bytes"]) for s in d["top_sites"]]
    assert deltas == sorted(deltas, reverse=True) and len(deltas) == 10
    assert d["a"]["provenance"].startswith("recorded on an NVIDIA H200")
    _adds_up(diff_files(a, b))
    # the text: the headline, then tables in lab.report's units
    code, out, err = _cli(capsys, "diff", str(a), str(b))
    assert code == 0 and out.splitlines()[0] == d["headline"]
    assert "activations" in out and " GB" in out and "Δ (B − A)" in out


def test_the_same_snapshot_twice_is_no_difference():
    d = diff_files(H200, H200)
    assert d.peak_delta_bytes == 0 and not any(d.by_category_delta.values())
    assert d.top_sites == [] and d.a.label != d.b.label  # A (...) and B (...)
    assert d.a.guessed and any("guessed" in n for n in d.notes)


def test_variants_of_one_file_and_bad_input(tmp_path, capsys):
    both = tmp_path / "runs.json"
    both.write_text(json.dumps([json.loads((REF / "mixed-precision" / f"{v}.json").read_text())
                                for v in ("baseline", "fp16")]))
    code, out, err = _cli(capsys, "diff", str(both), str(both), "--variant", "baseline",
                          "--variant", "fp16", "--json")
    assert code == 0, err
    assert json.loads(out)["b"]["label"] == "fp16"
    for argv, expect in [
        ((str(both), str(both)), "holds 2 results (baseline, fp16); pick one with --variant"),
        ((str(both), str(both), "--variant", "nope"), "no variant 'nope'"),
        ((str(tmp_path / "missing.pkl"), str(both)), "no such file"),
        ((str(both), str(both), "--variant", "a", "--variant", "b", "--variant", "c"),
         "once (both sides) or twice"),
    ]:
        code, out, err = _cli(capsys, "diff", *argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and expect in err, err


def test_result_against_snapshot_meets_at_short_sites(tmp_path):
    assert short_site("transformers/models/gpt2/modeling_gpt2.py:276 forward") == \
        "gpt2/modeling_gpt2.py:276 forward"
    assert short_site(SMALLER) == SMALLER and short_site("(no Python stack)") == "(no Python stack)"
    # a result and the snapshot memlab wrote of the same kind of run share their sites
    from tests.unit.test_snapshots import python_snapshot

    p = tmp_path / "raw.pickle"
    p.write_bytes(pickle.dumps(python_snapshot()))
    d = diff_files(REF / "linear-baseline" / "baseline.json", p)
    assert any("one side is a memlab result" in n for n in d.notes)
    assert d.b.guessed and not d.a.guessed


@pytest.mark.slow
def test_batch_16_vs_2_snapshots_bar(tmp_path, capsys):
    """Lesson 03's seed loop at batch 16 and 2 (cpu, small: the tiny model, 2 steps), each
    saved as a snapshot; `memlab diff --json` on the two snapshots vs the results' own peaks."""
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import load_experiment, measure_request

    lesson = load_course().find("03")
    module = load_experiment(str(lesson.experiment_path))
    peaks, paths = {}, {}
    for variant in ("seed_loop_b16", "seed_loop_b2"):
        paths[variant] = tmp_path / f"{variant}.pkl"
        req = RunRequest.for_lesson(lesson, variant, "cpu", "small", timing=False,
                                    overrides={"seed_small_batch": 2, "steps": 2},
                                    profile_path=str(paths[variant]))
        r = measure_request(req, getattr(module, variant))
        assert r.ok, r.error
        peaks[variant] = r.peak.bytes
    code, out, err = _cli(capsys, "diff", str(paths["seed_loop_b16"]),
                          str(paths["seed_loop_b2"]), "--json")
    assert code == 0, err
    d = json.loads(out)
    true = peaks["seed_loop_b2"] - peaks["seed_loop_b16"]
    assert true < 0 and abs(d["peak_delta_bytes"] - true) <= 0.01 * abs(true)
    assert d["by_category_delta"]["activations"] <= 0.5 * d["peak_delta_bytes"]  # both negative
    assert d["top_sites"] and d["by_phase_delta"]


PAIR = ROOT / "tests" / "fixtures" / "cuda_batch_pair"


@pytest.mark.skipif(not (PAIR / "peaks.json").exists(),
                    reason="record tests/fixtures/cuda_batch_pair on a GPU "
                           "(tests/fixtures/record_cuda_batch_pair.py)")
def test_raw_cuda_snapshots_batch_16_vs_2():
    """The same bar on real `_dump_snapshot`s (a GPT-2 config's plain HF loop on an H200):
    categories guessed from stacks and lifetimes, the truth is max_memory_allocated."""
    peaks = json.loads((PAIR / "peaks.json").read_text())
    d = diff_files(PAIR / "b16.pkl.gz", PAIR / "b2.pkl.gz")
    true = peaks["b2"] - peaks["b16"]
    assert true < 0 and abs(d.peak_delta_bytes - true) <= 0.01 * abs(true)
    # the peak is in backward (GPT-2's logits and their gradient): what the batch moves is
    # activations and backward's temporaries; weights and AdamW's state do not move at all.
    # Issue 14 expected at least half in activations; for this logits-heavy loop it is not so:
    # the same loop under `memlab profile --mode cpu` (categories recorded, not guessed) splits
    # the drop 48 % activations / 52 % temporaries, and the guesses here give 45 / 55.
    by = d.by_category_delta
    assert by.get("activations", 0) + by.get("temporaries", 0) <= 0.99 * d.peak_delta_bytes
    assert by.get("activations", 0) < 0 and by.get("temporaries", 0) < 0
    assert by.get("parameters", 0) == 0 and by.get("optimizer_state", 0) == 0
    assert d.a.guessed and d.b.guessed


def test_diff_is_headless():
    code = ("import sys, lab.snapshots.diff, lab.snapshots.diff_text, lab.commands.diff; "
            "bad = [m for m in ('textual', 'plotext', 'rich', 'torch') if m in sys.modules]; "
            "sys.exit(f'imported {bad}' if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr or r.stdout
