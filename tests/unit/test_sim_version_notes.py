"""Sim names the versions it runs outside of what was validated (issue 10: results say when),
from the one version table (lab/measure/versions.json), and only for a library the run used."""

from __future__ import annotations

import json

import pytest

from lab.measure import versions as V
from lab.measure.sim import versions as simulate

RECORDED = V.recorded("transformers")
FLOOR, TOP = V.validated_range("transformers")


@pytest.mark.parametrize("version, says", [
    (RECORDED + ".0", None),
    (RECORDED + ".9", None),
    (TOP + ".0", None if TOP == RECORDED else "checked against H200 runs with transformers "
     + RECORDED),
    ("99.0.0", f"validated for transformers {FLOOR}-{TOP}"),
])
def test_transformers_version_notes(monkeypatch, version, says):
    monkeypatch.setattr(simulate, "transformers_version", lambda: version)
    notes = [n for n in simulate.version_notes({"transformers"}) if n.startswith("transformers")]
    if says is None:
        assert notes == []
    else:
        assert len(notes) == 1 and says in notes[0]


def test_a_run_that_used_no_transformers_model_gets_no_transformers_note(monkeypatch):
    monkeypatch.setattr(simulate, "transformers_version", lambda: "99.0.0")
    assert not [n for n in simulate.version_notes({"torch"}) if n.startswith("transformers")]
    assert [n for n in simulate.version_notes({"torch", "transformers"})
            if n.startswith("transformers")]


def test_a_version_validated_here_drops_the_out_of_range_note(monkeypatch, tmp_path):
    monkeypatch.setattr(simulate, "transformers_version", lambda: "99.0.0")
    V.user_record_path().parent.mkdir(parents=True, exist_ok=True)
    V.user_record_path().write_text(json.dumps(
        {"transformers": {"99.0.0": {"outcome": "same", "summary": "same numbers"}}}))
    notes = [n for n in simulate.version_notes({"transformers"}) if n.startswith("transformers")]
    assert not any("validated for" in n for n in notes)
