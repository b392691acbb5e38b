"""The display layer: ONE policy for every number the lab shows — the app's screens, `memlab
run`'s report, the exports, `memlab dev cite`. lab.tui only styles what it gets from here
(tests/unit/test_display_policy.py keeps it from formatting a number itself).

The policy (units, numbers, tables, rows, provenance, downsample) is headless and torch-free and
imports nothing of `lab` but itself; the documents built with it from results — `text` (`memlab
run`'s plain-text report) and `export` (result.json, report.md, profile.pkl) — import the result
types and plot with plotext, lazily (pyproject's import-linter contracts say both).

units (lab.report.units) — the unit policy is written in its docstring:
    format_bytes(n, unit="auto", digits=2)  12_243_000_000 -> "12.24 GB"; 65_500 -> "65.50 kB";
                                            4 -> "4 B"; None -> "—"; never scientific notation
    signed_bytes(d)                         "+1.20 GB", "−800.00 kB", "±0 B"
    percent(frac)                           "+25%", "−18%", "+2.7%", "+0.0026%"
    exact_bytes(n), signed_exact_bytes(d)   "2,000,200,000 B", "+512 B" (checks, to the byte)
    capacity(n)                             a GPU's size, in GB and once in GiB (PyTorch's unit):
                                            "17.18 GB (16 GiB)", "150.11 GB (139.80 GiB)"
    seconds(s), number(v), metric(name, v)  "366.6 ms"; 26950.3 -> "26,950"; bytes metrics as bytes
    elapsed(s), ratio(x), given_gb(v)       "2 min 05 s" (a clock); "×1.002"; a prediction "4.4 GB"
    axis_unit(top)                          ("GB", 1e9) for a plot axis whose largest value is top
    parse_size(text), SIZE_HELP             "16GiB" -> 17179869184 (ValueError names what is accepted)

numbers (lab.report.numbers) — ONE parser for every number a person gives the lab:
    parse_number(value, what=, lo=, hi=, unit=, integer=, above=)  text or a number from a file
                                            -> a finite number in range, or NumberError (one line)

tables (lab.report.tables):
    table(headers, rows, right=None, markdown=False)   aligned text or Markdown; never cut;
                                                       number columns right-aligned (auto)
    key_values(pairs)                                  "name  value" lines

downsample (lab.report.downsample) — ONE rule for thinning a series, keeping its peaks:
    peak_indices(ys, points, lows=False), downsample(xs, ys, points)

rows (lab.report.rows) — ONE Δ-vs-baseline rule (see its docstring):
    Row(name, status, peak_bytes, peak_phase, step_time_s, mode, scale, ...)   frozen
    result_rows(results, rule=NAMED|FIRST) -> [Row]    NAMED: the variant "baseline" (lessons);
                                                       FIRST: the first row (compare)
    with_deltas(rows, rule), difference(a, b)          Δ only when both ran ok (a bound "≤"
                                                       against a baseline that ran out of memory)
    delta_note(rows), check_gap(check)                 what Δ cannot say; a check's gap
    peak_text(row) "OOM after 2.20 GB", delta_text(row) "(baseline)" | "−2.00 MB (−5%)" | "—",
    step_text(row), status_text(status), vs_text(d, frac), reference_cells(row, recorded_row)
    comparison_table(rows, references=None, reference_label="H200", markdown=False)
    check_cells(check, run_status), checks_table(checks, run_status)  "not reached (OOM)"

provenance (lab.report.provenance):
    provenance(result, recorded=False)  "recorded on an NVIDIA H200 (torch 2.11, transformers 5.17)"
                                        | "your GPU (<name>)" | "your CPU (small scale)"
                                        | "simulated (full scale, torch 2.13)"
    short_label(result, recorded=False) "H200 recording" | "your GPU" | "simulated (seed)": headers
    card_name(device name)              "NVIDIA H100 80GB HBM3" -> "H100": a card as labels name it
    recorded_on(results)                the card(s) recordings were made on: "H200", "H200/H100"
    provenance_of(results, recorded)    the shared label of several results
    allocator_line(allocator)           its peaks, saying whose (the GPU's or sim's model)
    code_path_note(mine, recording)     one line when the runs took other code paths, or None
"""

from .provenance import (allocator_line, card_name, code_path_note, provenance,
                         provenance_of, recorded_on, short_label, short_version)
from .rows import (FIRST, NAMED, Row, check_cells, checks_table, comparison_table, delta_text,
                   difference, peak_text, result_rows, row_of, status_text, step_text, vs_text,
                   with_deltas)
from .tables import key_values, table
from .units import (DASH, SIZE_HELP, axis_unit, capacity, elapsed, exact_bytes, format_bytes,
                    given_gb, metric, number, parse_size, percent, ratio, rough_percent, seconds,
                    signed_bytes,
                    signed_exact_bytes)

__all__ = ["DASH", "allocator_line", "elapsed", "given_gb", "ratio", "FIRST", "NAMED", "Row", "SIZE_HELP", "axis_unit", "capacity", "check_cells",
           "checks_table", "comparison_table", "delta_text", "difference", "exact_bytes",
           "format_bytes", "key_values", "metric", "number", "parse_size", "peak_text", "percent", "rough_percent",
           "provenance", "provenance_of", "recorded_on", "card_name", "result_rows", "row_of", "seconds", "short_label",
           "short_version",
           "signed_bytes", "signed_exact_bytes", "status_text", "step_text", "table",
           "code_path_note", "vs_text", "with_deltas"]
