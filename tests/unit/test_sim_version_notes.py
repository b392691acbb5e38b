"""Sim names the versions it runs outside of what the H200 checked (issue 10: results say when)."""

from __future__ import annotations

import pytest

from lab.measure.sim import versions as simulate


@pytest.mark.parametrize("version, says", [
    (simulate.RECORDED_TRANSFORMERS + ".0", None),
    (simulate.RECORDED_TRANSFORMERS + ".9", None),
    ("5.99.0", "checked against H200 runs with transformers " + simulate.RECORDED_TRANSFORMERS),
    ("4.50.0", "validated for transformers 5.x"),
])
def test_transformers_version_notes(monkeypatch, version, says):
    monkeypatch.setattr(simulate, "transformers_version", lambda: version)
    notes = [n for n in simulate.version_notes() if n.startswith("transformers")]
    if says is None:
        assert notes == []
    else:
        assert len(notes) == 1 and says in notes[0]
