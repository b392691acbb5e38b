"""lab.report: one unit policy, one table writer, one Δ-vs-baseline rule, provenance labels."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace as NS

import pytest

from lab.report import (FIRST, NAMED, Row, capacity, check_cells, comparison_table, delta_text,
                        format_bytes, metric, number, peak_text, percent, provenance,
                        result_rows, seconds, signed_bytes, table, code_path_note, with_deltas)
from lab.report.rows import delta_note
from lab.report.tables import numeric_columns

SCI = re.compile(r"\d[eE][+-]?\d")


# ---- units -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, text", [
    (4, "4 B"),  # was "4e-09 GB"
    (65_500, "65.50 kB"),  # was "6.55e-05 GB"
    (999, "999 B"), (1000, "1.00 kB"), (999_999, "1.00 MB"), (999_995_000, "1.00 GB"),
    (12_243_000_000, "12.24 GB"), (44_020_000, "44.02 MB"), (0, "0 B"),
    (-2_000_000, "−2.00 MB"), (None, "—"), (3 * 10**13, "30.00 TB"),
])
def test_format_bytes_steps_down_and_never_uses_scientific_notation(n, text):
    assert format_bytes(n) == text


def test_no_byte_count_from_1_to_1e15_prints_in_scientific_notation():
    for exp in range(16):
        for m in (1, 3.3, 6.55, 9.999):
            n = m * 10**exp
            for f in (format_bytes(n), signed_bytes(-n), number(n), metric("peak_bytes", n)):
                assert not SCI.search(f), f
            assert not SCI.search(number(n / 1e12)), number(n / 1e12)


@pytest.mark.parametrize("d, text", [(1_200_000_000, "+1.20 GB"), (-800_000, "−800.00 kB"),
                                     (0, "±0 B"), (None, "—")])
def test_signed_bytes(d, text):
    assert signed_bytes(d) == text


@pytest.mark.parametrize("f, text", [(0.25, "+25%"), (-0.18, "−18%"), (0.027, "+2.7%"),
                                     (2.56e-5, "+0.0026%"), (0.0, "±0%"), (None, "—"),
                                     (float("nan"), "—")])
def test_percent(f, text):
    assert percent(f) == text


@pytest.mark.parametrize("f, text", [(0.25, "+25%"), (-0.054, "−5%"), (-4.5e-5, "<1%"),
                                     (0.0, "±0%"), (12.5, "+1,250%"), (None, "—")])
def test_a_guess_is_off_by_whole_percents(f, text):
    # the course map's guess column is 5 cells: '−0.0045%' broke over two lines there
    from lab.report import rough_percent

    assert rough_percent(f) == text


def test_a_capacity_is_said_once_in_gb_and_in_the_gib_pytorch_quotes():
    assert capacity(16 * 2**30) == "17.18 GB (16 GiB)"
    assert capacity(3 * 10**9) == "3.00 GB (2.79 GiB)"
    # an H200 as CUDA reports it: the GiB figure is its OOM message's "total capacity"
    assert capacity(150_109_880_320) == "150.11 GB (139.80 GiB)"
    assert capacity(3_000) == "3.00 kB"


def test_metrics_named_as_bytes_are_bytes_and_the_rest_plain_numbers():
    assert metric("parameter_bytes", 6_175_000_001) == "6.18 GB"
    assert metric("reserved_free", 8.59e9) == "8.59 GB"
    assert metric("tokens_per_s", 26950.3) == "26,950"
    assert metric("loss_last", 3.16812) == "3.168"
    assert seconds(0.3666) == "366.6 ms" and seconds(None) == "—"


# ---- tables ------------------------------------------------------------------------------------
def test_text_table_never_cuts_a_cell_and_right_aligns_numbers():
    rows = [["forward 0 and a very long phase name", "4.40 GB"], ["x", "12,345.67 GB"]]
    out = table(["phase", "bytes"], rows).splitlines()
    assert out[2].startswith("forward 0 and a very long phase name")
    assert out[2].endswith("    4.40 GB") and out[3].endswith("12,345.67 GB")
    assert out[0].rstrip().endswith("bytes")  # the header follows its column's alignment
    assert len({len(line) for line in out[:2]}) == 1


def test_markdown_table_aligns_and_escapes():
    md = table(["a", "b"], [["x|y", "1.00 GB"], ["z", "—"]], markdown=True).splitlines()
    assert md[0] == "| a | b |" and md[1] == "| --- | ---: |"
    assert md[2] == "| x\\|y | 1.00 GB |"


def test_numeric_column_detection_ignores_placeholders_and_status_words():
    rows = [["baseline", "4.40 GB", "(baseline)"], ["bf16", "OOM after 2.20 GB", "—"],
            ["fp16", "3.00 GB", "−1.40 GB (−32%)"]]
    assert numeric_columns(rows) == {1, 2}
    paths = [["01-linear-baseline/experiment.py:25 baseline", "2.00 GB", "45%", "366.6 ms"]]
    assert numeric_columns(paths) == {1, 2, 3}  # a path that starts with digits is text


# ---- the Δ rule --------------------------------------------------------------------------------
def _r(variant, status="ok", peak=1_000_000_000, mode="sim", scale="seed", step=None):
    return NS(variant=variant, status=status, peak=NS(bytes=peak, phase="forward 0"),
              step_time_s=step, mode=mode, scale=scale)


def test_lessons_compare_with_the_variant_named_baseline_not_the_first():
    rows = result_rows([_r("no_grad", peak=800_000_000), _r("baseline")])
    assert rows[1].is_baseline and not rows[0].is_baseline
    assert rows[0].delta_bytes == -200_000_000 and rows[0].delta_frac == pytest.approx(-0.2)
    assert delta_text(rows[0]) == "−200.00 MB (−20%)" and delta_text(rows[1]) == "(baseline)"


def test_without_a_baseline_variant_there_is_no_delta():
    rows = result_rows([_r("no_grad"), _r("bf16", peak=1)])
    assert all(r.delta_bytes is None and not r.is_baseline for r in rows)


def test_compare_takes_the_first_row_as_baseline():
    rows = with_deltas([Row("bf16", "ok", 500), Row("baseline", "ok", 1000)], rule=FIRST)
    assert rows[0].is_baseline and rows[1].delta_bytes == 500


@pytest.mark.parametrize("base_status, row_status", [("oom", "oom"), ("ok", "oom"),
                                                     ("cancelled", "ok"), ("ok", "timeout")])
def test_delta_only_when_both_ran_ok(base_status, row_status):
    rows = result_rows([_r("baseline", base_status, 2_000), _r("x", row_status, 1_000)])
    assert rows[1].delta_bytes is None and delta_text(rows[1]) == "—"


def test_against_a_baseline_that_ran_out_of_memory_the_delta_is_a_bound():
    # it needed more than the 2,000 B it reached: a variant that fits in 1,000 saved at least 1,000
    rows = result_rows([_r("baseline", "oom", 2_000), _r("x", "ok", 1_000), _r("y", "ok", 3_000)])
    assert rows[1].delta_bound and delta_text(rows[1]) == "≤−1.00 kB (≤−50%)"
    assert delta_text(rows[2]) == "—"  # above what the baseline reached: nothing to bound
    assert "at least that much less" in delta_note(rows)
    assert delta_note(result_rows([_r("baseline", "cancelled", 0), _r("x")])) == \
        "the baseline did not finish: no Δ to compare with"


def test_a_stopped_run_shows_its_status_never_zero():
    assert peak_text(Row("b", "oom", 2_200_000_000)) == "OOM after 2.20 GB"
    assert peak_text(Row("b", "cancelled", 0)) == "cancelled"
    assert peak_text(Row("b", "ok", 0)) == "0 B"  # a measured zero is a zero
    check = NS(name="output", expected_bytes=1_000_000_000, measured_bytes=0, source="tracked")
    cells = check_cells(check, "oom")
    assert cells[2] == "not reached (OOM)" and cells[3] == "—"


def test_a_check_of_zero_bytes_that_matches_is_not_nan():
    cells = check_cells(NS(name="freed", expected_bytes=0, measured_bytes=0, source="t"))
    assert cells[1:4] == ["0 B", "0 B", "none"]
    cells = check_cells(NS(name="w", expected_bytes=1000, measured_bytes=1512, source="t"))
    assert cells[3] == "+512 B (+51%)"


def test_comparison_table_with_recordings_compares_only_like_with_like():
    rows = result_rows([_r("baseline", peak=4_400_000_000), _r("no_grad", "oom", 2_200_000_000)])
    refs = {r.name: r for r in result_rows([_r("baseline", peak=4_000_000_000, mode="cuda"),
                                            _r("no_grad", peak=3_400_000_000, mode="cuda")])}
    out = comparison_table(rows, refs).splitlines()
    assert "H200 peak (recorded)" in out[0] and "vs H200" in out[0]
    assert out[2].endswith("4.00 GB  +400.00 MB (+10%)")
    assert "OOM after 2.20 GB" in out[3] and out[3].endswith("3.40 GB                  —")
    small = result_rows([_r("baseline", peak=44_000_000, scale="small")])
    assert "other scale (seed)" in comparison_table(small, refs)


# ---- provenance --------------------------------------------------------------------------------
def _res(mode, scale="seed", name="NVIDIA H200", torch="2.11.0+cu130", **kw):
    """Shaped like a RunResult: its mode and what the mode means (on_gpu, simulated)."""
    from lab.measure.modes import mode_info

    info = mode_info(mode)
    return NS(mode=mode, scale=scale, device=NS(name=name), torch_version=torch,
              on_gpu=info.on_gpu, simulated=info.simulated, **kw)


def test_provenance_labels():
    assert provenance(_res("cuda", transformers_version="5.17.0"), recorded=True) == \
        "recorded on an NVIDIA H200 (torch 2.11, transformers 5.17)"
    assert provenance(_res("cuda"), recorded=True) == "recorded on an NVIDIA H200 (torch 2.11)"
    assert provenance(_res("cuda", name="Tesla T4")) == "your GPU (Tesla T4)"
    assert provenance(_res("cpu", "small", name="CPU")) == "your CPU (small scale)"
    assert provenance(_res("sim", torch="2.13.0+cpu", name="simulated")) == \
        "simulated (full scale, torch 2.13)"


def test_a_recording_is_named_by_the_card_it_ran_on():
    from lab.report import card_name, recorded_on, short_label

    assert [card_name(n) for n in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
                                   "NVIDIA GeForce RTX 4090", "Tesla T4", "")] == \
        ["H200", "H100", "A100", "GeForce RTX 4090", "T4", "GPU"]
    h100 = _res("cuda", name="NVIDIA H100 80GB HBM3")
    assert short_label(h100, recorded=True) == "H100 recording"
    assert recorded_on([_res("cuda"), h100, _res("cuda")]) == "H200/H100"


def test_version_note_once_when_versions_differ():
    # recordings that name no code paths: the versions that choose them stand in, said once
    recs = [_res("cuda", transformers_version="5.17.0", variant="baseline", code_paths=None)]
    mine = [_res("sim", torch="2.13.0", transformers_version="4.57.1", variant="baseline",
                 code_paths=None)]
    note = code_path_note(mine, recs)[0]
    assert note.count("2.11") == 1 and "torch 2.13" in note and "transformers 4.57" in note
    same = [_res("sim", torch="2.11.1", transformers_version="5.17.2", variant="baseline",
                 code_paths=None)]
    assert code_path_note(same, recs) is None


def test_the_display_layer_imports_no_torch_and_nothing_else_of_lab():
    code = ("import sys, lab.report; import lab.report.rows, lab.report.provenance; "
            "bad = [m for m in sys.modules if m == 'torch' or (m.startswith('lab.') and not "
            "m.startswith('lab.report'))]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_allocator_peaks_say_whose_they_are():
    # Given allocator peaks measured on a GPU and peaks predicted by sim, when printed, then the
    # GPU's name NVML beside them and sim's say they are its model's prediction (no NVML number)
    from types import SimpleNamespace

    from lab.report import allocator_line

    gpu = SimpleNamespace(peak_allocated_bytes=2 * 10**9, peak_reserved_bytes=3 * 10**9,
                          nvml_used_bytes=4 * 10**9, predicted=False)
    sim = SimpleNamespace(**{**vars(gpu), "predicted": True, "nvml_used_bytes": 0})
    assert allocator_line(gpu).startswith("CUDA allocator: peak allocated 2.00 GB")
    assert "NVML" in allocator_line(gpu)
    assert "predicted by sim's model" in allocator_line(sim) and "NVML" not in allocator_line(sim)


def test_notes_are_said_once_per_lesson():
    # Given variants whose notes differ only in a number (the allocator's margin above the
    # tensors), when the results list them, then it is one note with the others' numbers in
    # brackets; a note only some carry is led by their names; version notes and stderr are left
    # to the version line and the failure box
    from types import SimpleNamespace

    from lab.tui.widgets.results import lesson_notes

    a = SimpleNamespace(variant="baseline", notes=["shared", "margin 1,024 B above the tensors",
                                                   "torch 2.13.0: other paths"])
    b = SimpleNamespace(variant="lightning", notes=["shared", "margin 2,048 B above the tensors",
                                                    "stderr tail: x", "only here"])
    assert lesson_notes([a, b]) == ["shared",
                                    "margin 1,024 B above the tensors (baseline; lightning: 2,048 B)",
                                    "lightning: only here"]


def test_a_plot_axis_reads_in_the_unit_of_the_numbers_beside_it():
    from lab.report import axis_unit

    assert axis_unit(782_200_000) == ("MB", 1e6)  # "peak 782.20 MB" beside it
    assert axis_unit(4_400_000_000) == ("GB", 1e9) and axis_unit(12) == ("B", 1.0)
