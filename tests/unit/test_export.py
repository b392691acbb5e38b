"""lab.report.export: result JSON, the Markdown report (tables + text plots), profile.pkl passthrough."""

from __future__ import annotations

import json
import pickle

import pytest

from lab import text_plots
from lab.report.export import ExportError, export, load, markdown
from lab.text_plots import tradeoff_plot
from lab.measure.result import Check, DeviceInfo, PhaseStats, Peak, RunResult, Timeline
from lab.playground.compare import Comparison, rows_for
from ..stderr_lines import own_lines


def _result(variant, peak, step=0.1, profile=None) -> RunResult:
    return RunResult(
        lesson="linear-baseline", variant=variant, mode="cpu", scale="small",
        device=DeviceInfo("CPU", "cpu"), peak=Peak(bytes=peak, phase="forward 1", index=1,
                                                   by_category={"parameters": peak // 2,
                                                                "activations": peak // 2}),
        phases=[PhaseStats("model", 0, peak // 2, peak // 2, peak // 2),
                PhaseStats("forward 1", peak // 2, peak, peak, peak // 2)],
        checks=[Check("weights", peak // 2, peak // 2, "tracked tensors")],
        timeline=Timeline(index=[0, 1, 2], t=[0, .1, .2], live=[peak // 2, peak, peak // 2],
                          events=3),
        step_time_s=step, profile_path=profile, notes=["a note"])


def _comparison() -> Comparison:
    results = [_result("baseline", 2_000_000), _result("bf16+ckpt", 1_200_000, step=0.15)]
    return Comparison("mlp", {"batch": 4, "seq": 64}, "cpu", "small", "tokens",
                      rows_for(results, 256, "tokens"), results)


def test_markdown_comparison_has_table_and_plots():
    md = markdown(_comparison(), plots=text_plots)  # the plots the commands pass
    assert md.startswith("# Playground: mlp")
    assert "| bf16+ckpt | ok | 1.20 MB | −800.00 kB (−40%) | 150.0 ms | 1,707 |" in md
    assert "mlp · your CPU (small scale) ·" in md  # where the numbers came from
    assert md.count("```text") == 2  # the overlaid timelines and the trade-off chart
    assert "● bf16+ckpt" in md and "peak memory vs step time" in md
    assert "- a note" in md


def test_markdown_results():
    md = markdown([_result("baseline", 2_000_000), _result("no_grad", 1_000_000)], title="Lesson 01")
    assert md.startswith("# Lesson 01") and "## no_grad" in md
    assert "| weights | 1,000,000 B | 1,000,000 B | none | tracked tensors |" in md
    assert "| no_grad | ok | 1.00 MB | −1.00 MB (−50%) | forward 1 |" in md
    assert "Numbers: your CPU (small scale)." in md
    # lesson results sit beside the H200 recordings, compared only at the same scale
    assert "H200 columns: recorded on an NVIDIA H200" in md and "other scale (seed)" in md


def test_tradeoff_plot_explains_sim():
    c = _comparison()
    for r in c.rows:
        r.step_time_s = None
    assert "sim measures bytes only" in tradeoff_plot(c)


def test_export_writes_json_md_and_passes_profile_through(tmp_path):
    prof = tmp_path / "run-profile.pkl"
    prof.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    r = _result("baseline", 2_000_000, profile=str(prof))
    out = tmp_path / "out"
    written = export(r, out)
    assert sorted(p.name for p in written) == ["profile.pkl", "report.md", "result.json"]
    assert (out / "profile.pkl").read_bytes() == prof.read_bytes()
    again = load(out / "result.json")
    assert isinstance(again, RunResult) and again.peak.bytes == 2_000_000


def test_export_comparison_round_trip(tmp_path):
    written = export(_comparison(), tmp_path, formats=("json",), name="comparison")
    c = load(written[0])
    assert isinstance(c, Comparison) and [r.combo for r in c.rows] == ["baseline", "bf16+ckpt"]


def test_export_list_of_results(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps([_result("a", 10).to_dict(), _result("b", 20).to_dict()]))
    assert [r.variant for r in load(p)] == ["a", "b"]


@pytest.mark.parametrize("content, expect", [
    (None, "no such file"), ("not json", "not JSON"), ('{"a": 1}', "not a memlab result"),
    ('{"schema": 99, "variant": "x"}', "not a memlab result"),
])
def test_load_errors_are_one_line(tmp_path, content, expect):
    p = tmp_path / "x.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(ExportError, match=expect) as info:
        load(p)
    assert "\n" not in str(info.value)


def test_export_into_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ExportError, match="is a file"):
        export(_result("a", 10), f)
    with pytest.raises(ExportError, match="unknown export format"):
        export(_result("a", 10), tmp_path, formats=("svg",))


def test_cli_export(tmp_path, capsys):
    from lab.cli import main

    src = tmp_path / "run.json"
    src.write_text(json.dumps(_result("a", 10).to_dict()))
    assert main(["export", str(src), "--to", str(tmp_path / "o"), "--format", "md"]) == 0
    assert (tmp_path / "o" / "report.md").is_file()
    capsys.readouterr()
    assert main(["export", str(tmp_path / "nope.json"), "--to", str(tmp_path)]) == 2
    assert main(["export", str(src), "--to", str(tmp_path), "--format", "svg"]) == 2
    err = capsys.readouterr().err
    assert len(own_lines(err)) == 2 and "no such file" in err and "svg" in err
