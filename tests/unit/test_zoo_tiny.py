"""One tiny case per category of the practitioner zoo, in sim (bench/ground_truth/cases.py).

The zoo's real sizes are judged against the GPU by bench/profile_vs_h200.py --suite zoo
(docs/ACCURACY.md); here each category's tiny arguments run on the simulated card, in this
process, as the worker runs `memlab profile --mode sim -- python SCRIPT ARGS`: the script must
run to its end. Where sim cannot yet, the case is a strict xfail that says how it fails today
(issue 37 item 1), so the fix that makes it run also has to take the mark off.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))

import cases  # noqa: E402
from zoo_report import tiny_args  # noqa: E402

# category -> the case whose tiny arguments stand for it
TINY = {"cnn": "zoo/cnn/resnet50-bf16-cl", "vit": "zoo/vit/vit-b16-bf16",
        "moe": "zoo/moe/qwen3-moe-bf16", "seq2seq": "zoo/seq2seq/t5-base-fp32",
        "encoder": "zoo/encoder/bert-large-mlm-bf16", "generate": "zoo/generate/llama-1b-static",
        "lora": "zoo/lora/llama-1b-ckpt", "lightning": "zoo/lightning/gpt2-bf16",
        "accum": "zoo/accum/qwen2.5-0.5b-bf16"}
# how each fails in sim today (issue 37 item 1 turns these into runs)
FAILS_TODAY: dict[str, str] = {}
NEEDS = {"lora": "peft", "lightning": "pytorch_lightning"}


def _profile(case) -> object:
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure
    from lab.measure.sim.gpus import gpu
    from lab.profile import script as experiment
    from lab.profile.run import finish, parse_command

    args = tiny_args(case, "sim")
    params = {"target": str(ROOT / case.script), "module": False, "args": args, "timeout_s": 0,
              "output_path": None, "steps": None, "gpu": "h100"}
    r = measure(experiment.script,
                VariantSpec("profile", "script", "", params, timing=False),
                backend_for("sim", gpu=gpu("h100")))
    return finish(r, parse_command(["python", str(ROOT / case.script), *args]), [], 0)


def _params():
    out = []
    for cat, cid in TINY.items():
        marks = [pytest.mark.slow]
        if cat in FAILS_TODAY:
            marks.append(pytest.mark.xfail(strict=True, reason=FAILS_TODAY[cat]))
        out.append(pytest.param(cat, cid, marks=marks, id=cat))
    return out


def test_every_category_has_a_tiny_case():
    zoo = {c.id: c for c in cases.zoo_cases()}
    assert set(TINY) == set(cases.ZOO_CATEGORIES)
    assert all(zoo[cid].category == cat for cat, cid in TINY.items())


@pytest.mark.parametrize("category, case_id", _params())
def test_the_tiny_case_runs_to_its_end_in_sim(category, case_id):
    if category in NEEDS:
        pytest.importorskip(NEEDS[category])
    [case] = [c for c in cases.zoo_cases() if c.id == case_id]
    r = _profile(case)
    assert r.status == "ok", r.error
    assert r.allocator.peak_allocated_bytes > 0  # the script's tensors reached the card
