"""The GPU rows that say they are validated are backed by recordings made on that card.

The H200 row is backed by every lesson's recording (assets/reference); the H100 row by 52 lesson
variants recorded on an H100 80GB HBM3 (assets/ground_truth/h100_lessons.json, written by
bench/card_vs_card.py). Its validation rests on that card's memory equalling the H200's, variant
by variant: when an H200 recording of one of those variants is re-made and its memory moves, the
H100 evidence no longer says anything about it, and this test names the variant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lab.measure.sim.gpus import GPUS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from card_vs_card import row  # noqa: E402  (what the summary keeps of a recording)

H100 = json.loads((ROOT / "assets" / "ground_truth" / "h100_lessons.json").read_text())


def test_the_h100_row_is_the_card_that_was_recorded():
    row = GPUS["h100"]
    assert H100["device"] == row.device_name
    assert H100["total_bytes"] == row.total_bytes
    assert row.validated


@pytest.mark.parametrize("key", sorted(H100["variants"]))
def test_an_h100_variant_holds_the_h200_recordings_memory(key):
    lesson, variant = key.split("/")
    h200 = json.loads((ROOT / "assets" / "reference" / lesson / f"{variant}.json").read_text())
    # every counter but NVML's used bytes, which hold the card's CUDA context
    theirs = {k: v for k, v in row(h200).items() if k != "nvml_used_bytes"}
    mine = {k: v for k, v in H100["variants"][key].items() if k != "nvml_used_bytes"}
    assert mine == theirs, f"{key}: the H200 recording moved; re-record it on an H100 too"


def test_every_other_validated_row_is_the_h200():
    assert {k for k, g in GPUS.items() if g.validated} == {"h100", "h200"}
