"""The one version table (lab/measure/versions.json) and its rule: older refused, newer noted
once, by the commands whose numbers used the library, until a validation here passed it."""

from __future__ import annotations

import io
import json

import pytest

from lab.measure import versions as V


def test_one_table_every_reader_agrees():
    from lab.measure import torch_compat

    assert torch_compat.CHECKED_ON == V.validated_versions("torch")
    for name in V.LIBRARIES:
        floor, top = V.validated_range(name)
        assert V.validated_versions(name)[0] == floor and V.validated_versions(name)[-1] == top
        assert V.in_range(name, V.recorded(name))


def test_the_floor_is_pyprojects():
    import tomllib

    from lab.paths import CHECKOUT_DIR

    deps = tomllib.loads((CHECKOUT_DIR / "pyproject.toml").read_text())["project"]["dependencies"]
    for name in V.LIBRARIES:
        assert f"{name}>={V.table()[name]['floor']}" in deps


def test_between_the_floor_and_the_newest_validated_is_validated():
    assert V.in_range("torch", "2.12.1")  # neither recorded nor run here, but in the range
    assert V.unvalidated("torch", "2.12.1") is None
    assert not V.in_range("torch", "2.10.0")


def test_older_is_refused_in_one_line():
    why = V.refusal({"torch": "2.10.0", "transformers": "5.24.0"})
    assert "torch 2.10.0 is older than" in why and "pip install 'torch>=" in why
    assert V.refusal({"torch": V.validated_range("torch")[1] + ".0"}) is None


def test_newer_says_how_to_check_it_and_a_passed_validation_silences_it():
    assert "memlab doctor --validate" in V.unvalidated("transformers", "99.1.0")
    record = {"transformers": {"99.1.0": {"outcome": "within", "summary": "moved within"}}}
    V.user_record_path().parent.mkdir(parents=True, exist_ok=True)
    V.user_record_path().write_text(json.dumps(record))
    assert V.unvalidated("transformers", "99.1.0") is None
    assert V.unvalidated("transformers", "99.1.1") is not None  # a patch release is checked anew
    record["transformers"]["99.1.0"] = {"outcome": "moved", "summary": "moved: lesson 16 by 6 %",
                                         "date": "2026-12-07T10:00:00+00:00"}
    V.user_record_path().write_text(json.dumps(record))
    assert "moved: lesson 16 by 6 %" in V.unvalidated("transformers", "99.1.0")


def test_an_unreadable_record_is_no_record():
    V.user_record_path().parent.mkdir(parents=True, exist_ok=True)
    V.user_record_path().write_text("{not json")
    assert V.user_record() == {}


def test_the_note_is_said_once_per_process_and_only_for_libraries_used(monkeypatch):
    monkeypatch.setattr(V, "_NOTED", set())
    monkeypatch.setattr(V, "installed", lambda name: {"torch": "99.0.0",
                                                      "transformers": "98.0.0"}.get(name))
    out = io.StringIO()
    V.note_unvalidated({"torch"}, out)
    V.note_unvalidated({"torch"}, out)
    assert out.getvalue().count("memlab: note: torch 99.0.0") == 1
    assert "transformers" not in out.getvalue()
    V.note_unvalidated({"torch", "transformers"}, out)
    assert out.getvalue().count("\n") == 2


def test_a_run_records_transformers_only_when_it_built_a_transformers_model():
    """The rule, on a stand-in class from a module named like transformers' (no transformers
    import: ~4 s). That real transformers models trip it, the validation baseline shows: its
    per-run flag equals each sim golden's depends_on_transformers (test_validation.py)."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)

    with V.libraries_used() as used:
        torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert "transformers" not in used and "transformers" not in V.library_versions(used)
    Block.__module__ = "transformers.models.gpt2.modeling_gpt2"
    with V.libraries_used() as used:
        Block()
    assert "transformers" in used
    assert V.used_by([type("R", (), {"versions": V.library_versions(used)})()]) == \
        {"torch", "transformers"}
    Block()  # after the block: nothing is watching
