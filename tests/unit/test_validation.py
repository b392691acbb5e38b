"""`memlab doctor --validate` (lab.dev.validate): the baseline it compares with is the course's
and agrees with the sim goldens; its verdicts lay a move at the right library's door; a passed
version is recorded and silences the note. (The run itself, 100 sim runs, is the command's: these
tests feed it numbers.)"""

from __future__ import annotations

import json

import pytest

from lab.dev import goldens as G
from lab.dev import validate as val
from lab.measure import versions as V

BASE = val.load_baseline()


def numbers(name: str, **change) -> val.Numbers:
    b = dict(BASE["cases"][name])
    b.update(change)
    return val.Numbers(**b)


def rows(**changed) -> dict[str, val.Numbers]:
    """The baseline's own numbers, with `changed` cases replaced."""
    out = {name: numbers(name) for name in BASE["cases"]}
    out.update(changed)
    return out


def here(**versions) -> dict[str, str]:
    return {**{k: BASE["made_with"][k] for k in ("torch", "transformers", "python")}, **versions}


def test_the_baseline_is_made_on_the_pinned_versions():
    pins = G.pinned()
    for lib in V.LIBRARIES:
        assert G.base_version(BASE["made_with"][lib]) == G.base_version(pins[lib]), (
            f"the validation baseline was made with {lib} {BASE['made_with'][lib]}, CI pins "
            f"{pins[lib]}: `memlab dev versions --baseline` on the pinned versions")


def test_the_baseline_holds_every_sim_variant_of_the_course():
    names = {c.name for c in val.cases()}
    missing, stale = sorted(names - set(BASE["cases"])), sorted(set(BASE["cases"]) - names)
    assert not missing and not stale, (f"not in the baseline: {missing}; no longer in the course: "
                                       f"{stale}; `memlab dev versions --baseline --new` adds what is missing")


def test_extending_the_baseline_runs_only_what_it_lacks_on_its_own_versions(tmp_path):
    names = [c.name for c in val.cases()]
    doc = {**BASE, "cases": {**{n: BASE["cases"][n] for n in names[:3] if n in BASE["cases"]},
                             "gone-lesson/variant": next(iter(BASE["cases"].values()))}}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    kept, missing = val.baseline_to_extend(dict(BASE["made_with"]), path)
    assert list(kept) == [n for n in names[:3] if n in BASE["cases"]]  # the stale case dropped
    assert missing == [n for n in names if n not in kept]
    with pytest.raises(ValueError, match="other versions"):
        val.baseline_to_extend({**BASE["made_with"], "transformers": "9.0.0"}, path)


def test_a_variant_that_needs_a_missing_package_is_no_move():
    name = next(iter(BASE["cases"]))
    gone = rows(**{name: numbers(name, status="needs torchao", sha256="x")})
    assert val.moves(BASE, gone, {}) == []


@pytest.mark.parametrize("entry", G.SUBSET, ids=lambda e: e.name)
def test_the_baseline_agrees_with_the_sim_golden(entry):
    """The goldens are checked by every CI run; a baseline older than them fails here."""
    golden, base = G.load_golden(entry), BASE["cases"].get(entry.name)
    assert golden is not None and base is not None
    fields = golden["sim"]
    digest = val.digest(fields)
    assert base["sha256"] == digest, (f"{entry.name}: the validation baseline's numbers are not "
                                      "the golden's: `memlab dev versions --baseline` after "
                                      "`memlab dev goldens --why`")
    assert base["transformers"] == golden["depends_on_transformers"] or \
        isinstance(entry, G.PlainEntry)


def _uses(tf: bool) -> str:
    return next(n for n, b in BASE["cases"].items()
                if b["transformers"] == tf and b["status"] == "ok" and b["reserved"])


def test_a_new_transformers_with_equal_numbers_is_same():
    out, unexplained = val.verdicts(BASE, rows(), {}, here(transformers="99.0.0"))
    by = {v.library: v for v in out}
    assert by["transformers"].outcome == "same" and "same numbers" in by["transformers"].summary
    assert by["torch"].outcome == "baseline" and unexplained == []


def test_a_small_move_is_within_tolerance_and_a_large_one_names_the_variant():
    name = _uses(True)
    b = BASE["cases"][name]
    small = rows(**{name: numbers(name, sha256="x", reserved=int(b["reserved"] * 1.01))})
    out, _ = val.verdicts(BASE, small, {name: "lesson 16 variant x"}, here(transformers="99.0.0"))
    tf = {v.library: v for v in out}["transformers"]
    assert tf.outcome == "within" and "+1.00 % (reserved)" in tf.summary

    large = rows(**{name: numbers(name, sha256="x", reserved=int(b["reserved"] * 1.06))})
    out, _ = val.verdicts(BASE, large, {name: "lesson 16 variant x"}, here(transformers="99.0.0"))
    tf = {v.library: v for v in out}["transformers"]
    assert tf.outcome == "moved"
    assert "moved: lesson 16 variant x by +6.00 % (reserved)" in tf.summary


def test_a_variant_without_a_transformers_model_is_not_laid_at_transformers_door():
    name = _uses(False)
    moved = rows(**{name: numbers(name, sha256="x", status="error")})
    out, unexplained = val.verdicts(BASE, moved, {}, here(transformers="99.0.0"))
    assert {v.library: v.outcome for v in out}["transformers"] == "same"
    assert unexplained and "status ok -> error" in unexplained[0]  # on torch's own version
    out, unexplained = val.verdicts(BASE, moved, {}, here(torch="99.0.0",
                                                          transformers="99.0.0"))
    assert {v.library: v.outcome for v in out} == {"torch": "moved", "transformers": "same"}
    assert unexplained == []


def test_a_passed_version_is_recorded_and_the_note_stops():
    out, _ = val.verdicts(BASE, rows(), {}, here(transformers="99.0.0"))
    assert V.unvalidated("transformers", "99.0.0") is not None
    val.record(out, here(transformers="99.0.0"))
    assert V.unvalidated("transformers", "99.0.0") is None
    mine = V.validated_here("transformers", "99.0.0")
    assert mine["outcome"] == "same" and mine["with"]["torch"] == BASE["made_with"]["torch"]
    assert "torch" not in V.user_record()  # the baseline's own version: nothing to record


def test_dev_versions_add_writes_what_passed_into_the_table(tmp_path):
    table = tmp_path / "versions.json"
    table.write_text(V.TABLE_PATH.read_text())
    out, _ = val.verdicts(BASE, rows(), {}, here(transformers="99.0.0"))
    try:
        added = val.add_to_table(out, here(transformers="99.0.0"), path=table)
        assert added and added[0].startswith("transformers 99.0: same numbers")
        listed = json.loads(table.read_text())["libraries"]["transformers"]["validated"]
        assert listed[-1]["version"] == "99.0" and "memlab doctor --validate" in listed[-1]["how"]
        assert val.add_to_table(out, here(transformers="99.0.0"), path=table) == []  # once
    finally:
        V.table.cache_clear()


def test_doctor_validate_prints_a_verdict_per_library(monkeypatch, capsys):
    from lab.cli import main

    monkeypatch.setattr(val, "run_all", lambda on_case=None, only=None: rows())
    monkeypatch.setattr(val, "installed_versions", lambda: here(transformers="99.0.0"))
    assert main(["doctor", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "transformers 99.0.0: same numbers" in out
    assert f"torch {BASE['made_with']['torch']}: the version the baseline was made with" in out
    assert "recorded as validated here" in out
    assert V.unvalidated("transformers", "99.0.0") is None


def test_the_progress_bar_rewrites_one_line_on_a_terminal_and_logs_tenths_elsewhere():
    import io

    from lab.commands.validate import Bar

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = Bar(tty)
    for i in range(11):
        bar.show(i, 10, f"lesson 01 variant v{i}")
    bar.close()
    assert tty.getvalue().count("\r\x1b[K") == 12 and "\n" not in tty.getvalue()
    assert "█" * 24 + "] 10/10 · lesson 01 variant v10" in tty.getvalue()

    log = io.StringIO()
    bar = Bar(log)
    for i in range(101):
        bar.show(i, 100, "x")
    assert log.getvalue().count("\n") == 11 and "100/100 runs" in log.getvalue()
