"""Exports from a run or a comparison: the result JSON, a Markdown report, profile.pkl.

    export(results_or_comparison, "out/")        -> [out/result.json, out/report.md, out/profile*.pkl]
    markdown(results_or_comparison)              -> the report as a string

The same file names for `memlab export` and `memlab compare --export`: result.json (a run, a
list of runs or a comparison), report.md, and the memory snapshots: profile.pkl for one result,
profile-<variant>.pkl for several. The Markdown report holds the tables and the text plots
(plotext, uncoloured, in code blocks), so it reads the same in a terminal, on GitHub and in a
workshop handout; every table says where its numbers came from (lab.report.provenance), and a
lesson's results sit beside the H200 recordings. Snapshots are passed through as the run saved
them (`memlab run --snapshot`, `compare --export`: the allocator's history on cuda, the tensor
tracker's trace in cpu and sim); a result JSON holds no trace to make one from, and
`profile_note` says so. The SVG screenshot of the results screen is the app's (lab.tui).

Headless: neither plotext nor Textual is imported here; the Markdown report's plots come from
the `plots` the caller passes (lab.text_plots), and without them it holds the tables alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Union

from lab.atomic import atomic_write
from lab.measure.result import RunResult
from lab.playground.compare import Comparison
from lab.playground.text import comparison_header, comparison_table
from lab.report import (allocator_line, checks_table, format_bytes, metric, provenance_of,
                        result_rows, table)
from lab.report.provenance import code_path_note, recorded_on
from lab.report.rows import comparison_table as results_table, delta_note, row_of, with_deltas

Exportable = Union[RunResult, list, Comparison]
FORMATS = ("json", "md", "profile")


class ExportError(Exception):
    """One line: what could not be exported and why."""


# ---- loading what `memlab run --json` / `memlab compare --json` wrote -------------------------------
def load(path: str | Path) -> Exportable:
    from lab.decode import DecodeError, decoded, loads, results_from_json
    from lab.measure.schema import decode

    from lab.user_files import RESULT_LIMIT, UserFileError, read_user_file

    try:
        data = loads(read_user_file(path, RESULT_LIMIT), what=str(path))
    except (DecodeError, UserFileError) as e:
        raise ExportError(str(e)) from None
    except OSError as e:
        raise ExportError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        if isinstance(data, dict) and data.get("kind") == "comparison":
            # typed like a result: its rows and results checked field by field
            return decoded(lambda d: decode(Comparison, d, "comparison"), data)
        if isinstance(data, list):
            return results_from_json(data)
        if isinstance(data, dict) and "variant" in data:
            return results_from_json(data)[0]
    except DecodeError as e:
        raise ExportError(f"{path}: not a memlab result ({e})") from None
    raise ExportError(f"{path} is JSON but not a memlab result or comparison "
                      "(from `memlab run --json` or `memlab compare --json`)")


def _results(obj: Exportable) -> list[RunResult]:
    if isinstance(obj, Comparison):
        return list(obj.results)
    if isinstance(obj, RunResult):
        return [obj]
    return list(obj)


def to_json(obj: Exportable) -> Any:
    if isinstance(obj, Comparison):
        return obj.to_dict()
    if isinstance(obj, RunResult):
        return obj.to_dict()
    return [r.to_dict() for r in obj]


# ---- Markdown -------------------------------------------------------------------------------------
def markdown(obj: Exportable, title: str | None = None, plots: Any = None,
             recorded: bool = False) -> str:
    """`plots`: what draws the text plots (lab.text_plots, which the commands pass: this module
    imports no plotting library); None leaves them out. `recorded`: the results were loaded
    from the recordings (assets/reference)."""
    if isinstance(obj, Comparison):
        return _comparison_md(obj, title, plots)
    return _results_md(_results(obj), title, plots, recorded)


def _code(text: str) -> str:
    return f"```text\n{text.rstrip()}\n```"


def _comparison_md(c: Comparison, title: str | None, plots: Any) -> str:
    out = [f"# {title or f'Playground: {c.workload}'}", "",
           comparison_header(c), "",
           comparison_table(c, markdown=True), ""]
    if plots:
        out += ["## Live memory over time", "", _code(plots.timeline_plot(c.results, width=100)),
                "", "## Peak memory vs step time", "", _code(plots.tradeoff_plot(c)), ""]
    notes = sorted({n for r in c.results for n in r.notes})
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out)


def _references(results: list[RunResult]) -> dict[str, RunResult]:
    """The recordings of the lesson these results belong to (none for the playground)."""
    from lab.course.reference import load_reference

    lessons = {r.lesson for r in results}
    if len(lessons) != 1:
        return {}
    wanted = {r.variant for r in results}
    return {v: ref for v, ref in load_reference(lessons.pop()).items() if v in wanted}


def _results_md(results: list[RunResult], title: str | None, plots: Any,
                recorded: bool = False) -> str:
    if not results:
        return f"# {title or 'memlab results'}\n\n(no results)\n"
    refs = {} if recorded else _references(results)
    source = provenance_of(results, recorded)
    if "scale" not in source:  # "your GPU (…)" and recordings do not say it
        source += f", {results[0].scale} scale"
    out = [f"# {title or results[0].lesson}", "", f"Numbers: {source}."]
    if refs:
        card = recorded_on(refs.values())  # the card they ran on, read from them
        out.append(f"{card} columns: {provenance_of(refs.values(), recorded=True)}.")
        note = code_path_note(results, refs.values())  # the one rule (lab.report.provenance)
        if note:
            out.append(note[0])
    ref_rows = {row.name: row for row in with_deltas([row_of(r) for r in refs.values()])}
    rows = result_rows(results)
    out += ["", results_table(rows, ref_rows or None, markdown=True,
                              reference_label=recorded_on(refs.values())), ""]
    if delta_note(rows):  # a baseline that stopped: what its Δ column means
        out += [f"*{delta_note(rows)}*", ""]
    for r in results:
        out += [f"## {r.variant}", ""]
        if r.error:
            out += [f"**{r.status}**: {r.error.splitlines()[0]}", ""]
        if r.phases:
            prow = [[p.name, format_bytes(p.delta_bytes), format_bytes(p.end_bytes),
                     format_bytes(p.peak_bytes)] for p in r.phases]
            out += [table(["phase", "Δ tensors", "live at end", "peak in phase"], prow,
                          markdown=True), ""]
        if r.peak.by_category:
            crow = [[k, format_bytes(v)]
                    for k, v in sorted(r.peak.by_category.items(), key=lambda kv: -kv[1])]
            what = "Live at the peak" if r.ok else f"Live when it stopped ({r.status})"
            out += [f"{what} ({format_bytes(r.peak.bytes)}, during `{r.peak.phase or '—'}`):",
                    "", table(["category", "bytes"], crow, markdown=True), ""]
        if r.checks:
            out += [checks_table(r.checks, r.status, markdown=True), ""]
        if r.allocator:
            a = r.allocator
            out += [allocator_line(a) + ".", ""]
        if r.metrics:
            out += ["Metrics: " + ", ".join(f"{k} = {metric(k, v)}" for k, v in r.metrics.items())
                    + ".", ""]
        for n in r.notes:
            out.append(f"- {n}")
        if r.notes:
            out.append("")
    if plots:
        out += ["## Live memory over time", "", _code(plots.timeline_plot(results, width=100)),
                ""]
    return "\n".join(out)


# ---- writing --------------------------------------------------------------------------------------
def export(obj: Exportable, out_dir: str | Path, formats: tuple[str, ...] = FORMATS,
           name: str = "result", title: str | None = None, recorded: bool = False,
           plots: Any = None) -> list[Path]:
    """Write the chosen formats into `out_dir` (created if needed); returns the files written.
    `recorded`: the results came from the recordings (the report labels them so); `plots`: the
    Markdown report's text plots (markdown's)."""
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ExportError(f"unknown export format {', '.join(sorted(unknown))}; "
                          f"use {', '.join(FORMATS)}")
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out_dir} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"cannot create {out_dir}: {e.strerror or e}") from None
    written: list[Path] = []
    try:
        if "json" in formats:
            p = out / f"{name}.json"
            atomic_write(p, json.dumps(to_json(obj), indent=1))
            written.append(p)
        if "md" in formats:
            p = out / "report.md"
            atomic_write(p, markdown(obj, title, plots, recorded=recorded))
            written.append(p)
        if "profile" in formats:
            with_profile = _with_profile(_results(obj))
            for r in with_profile:
                src = Path(r.profile_path)
                if src.resolve().parent == out.resolve():  # compare --export wrote it here
                    written.append(src)
                    continue
                dest = out / ("profile.pkl" if len(with_profile) == 1 else
                              f"profile-{_safe(r.variant)}.pkl")
                if src.resolve() != dest.resolve():
                    shutil.copyfile(src, dest)
                written.append(dest)
    except OSError as e:
        raise ExportError(f"cannot write into {out_dir}: {e.strerror or e}") from None
    return written


def _with_profile(results: list[RunResult]) -> list[RunResult]:
    return [r for r in results if r.profile_path and Path(r.profile_path).is_file()]


def profile_note(obj: Exportable) -> str | None:
    """Why no memory snapshot was exported, or None when one was (or could be)."""
    results = _results(obj)
    if _with_profile(results):
        return None
    gone = [r.profile_path for r in results if r.profile_path]
    if gone:
        return ("no profile.pkl: the snapshot files these results name are gone ("
                + ", ".join(gone) + ")")
    return ("no profile.pkl: these results were run without a memory snapshot, and a result "
            "JSON holds no trace to make one from. Run again with one: `memlab run LESSON "
            "--snapshot p.pkl` or `memlab compare … --export DIR` (the allocator's history on "
            "cuda, the tensor tracker's trace in cpu and sim; pytorch.org/memory_viz opens both)")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name) or "variant"


__all__ = ["ExportError", "FORMATS", "export", "load", "markdown", "profile_note", "to_json"]
