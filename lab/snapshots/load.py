"""Open a file the viewer understands: a PyTorch snapshot pickle, or the lab's own result JSON.

Every failure is a `SnapshotError` with one line that names the file and what was expected;
the CLI prints it and exits 2, the app shows it. Nothing in a pickle runs (see `unpickle`).
"""

from __future__ import annotations

import gc
import gzip
import pickle
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lab.decode import MALFORMED, DecodeError, loads, result_from_dict
from lab.user_files import SNAPSHOT_LIMIT, UserFileError, open_gzip_or_plain

from . import frames as fr
from .stream import FULL_OPEN_LIMIT, Window, WindowError, cuts_by_device, load_window, parse_window
from .summary import Allocation, Band, Oom, Series, SnapshotSummary, summarize
from .unpickle import RefusedPickle, gc_paused, load_plain

PICKLE_MAGIC = b"\x80"  # protocol 2+ opens with PROTO
GZIP_MAGIC = b"\x1f\x8b"  # a compressed snapshot (the shipped H200 ones: *.profile.pkl.gz)


class SnapshotError(Exception):
    """One line: what is wrong with the file, and what would be accepted."""


ACCEPTS = ("a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) or a memlab result "
           "JSON (memlab run --json)")


def read(path: str | Path) -> tuple[str, Any]:
    """('snapshot', dict) or ('result', dict | list). Raises SnapshotError.

    The file is read through lab.user_files: a FIFO, a device or a folder is refused before it
    is opened, and neither the file nor what a gzip inflates to may pass SNAPSHOT_LIMIT. A
    pickle of more than FULL_OPEN_LIMIT bytes is refused with a pointer to --window (a full
    load needs ~7 times the pickle's size in memory)."""
    with _read_errors(path), open_gzip_or_plain(path, SNAPSHOT_LIMIT) as f:
        head = f.peek(1)[:1]
        if head == PICKLE_MAGIC:
            _check_size(path)
            return "snapshot", _check_snapshot(path, load_plain(f))
        text = f.read()
    try:
        data = loads(text, what=str(path))
    except DecodeError as e:
        if text.lstrip()[:1] not in (b"{", b"["):
            raise SnapshotError(f"{path} is neither a pickle nor JSON; give {ACCEPTS}") from None
        raise SnapshotError(str(e)) from None
    if isinstance(data, dict) and ("device_traces" in data or "segments" in data):
        return "snapshot", _check_snapshot(path, data)  # a snapshot someone saved as JSON
    if _is_result(data) or (isinstance(data, dict) and data.get("kind") == "comparison"):
        return "result", data
    raise SnapshotError(f"{path} is JSON but not {ACCEPTS}")


@contextmanager
def _read_errors(path):
    """What opening or unpickling `path` raised, as one SnapshotError line (the full load's and
    the window's alike)."""
    try:
        yield
    except UserFileError as e:
        raise SnapshotError(str(e)) from None
    except RefusedPickle as e:
        raise SnapshotError(f"{path}: refused: {e}; a memory snapshot holds only plain "
                            "containers, numbers and strings, so nothing in it was run") from None
    except (pickle.UnpicklingError, EOFError, MemoryError, gzip.BadGzipFile, *MALFORMED) as e:
        # (a damaged FRAME length is an OverflowError, a deep one a RecursionError)
        raise SnapshotError(f"{path}: not a readable pickle ({type(e).__name__}: "
                            f"{_one_line(e) if str(e) else 'damaged or truncated'})") from None
    except OSError as e:
        raise SnapshotError(f"{path}: cannot read it ({e.strerror or e})") from None


def read_window(path: str | Path, window: Window) -> tuple[dict, dict[int, Any], int]:
    """A snapshot pickle streamed (lab.snapshots.stream): (the snapshot with the window's trace
    entries only, {device: Cut}, stacks lost). Raises SnapshotError."""
    with _read_errors(path), open_gzip_or_plain(path, SNAPSHOT_LIMIT) as f:
        if f.peek(1)[:1] != PICKLE_MAGIC:
            raise SnapshotError(f"{path}: --window reads a PyTorch memory snapshot pickle; "
                                "this file is not one (a result JSON opens whole)")
        try:
            data, cuts, lost = load_window(f, window)
        except WindowError as e:
            raise SnapshotError(f"{path}: {e}") from None
    data = _check_snapshot(path, data)
    return data, cuts_by_device(data, cuts), lost


def _check_size(path) -> None:
    """A pickle past FULL_OPEN_LIMIT (a gzip's inflated size, from its trailer) is not opened whole."""
    from lab.report import format_bytes

    size = Path(path).stat().st_size
    with open(path, "rb") as f:
        if f.read(2) == GZIP_MAGIC and size >= 18:
            f.seek(-4, 2)  # ISIZE: the inflated size mod 2**32 (a wrapped one reads small)
            size = max(size, int.from_bytes(f.read(4), "little"))
    if size > FULL_OPEN_LIMIT:
        raise SnapshotError(f"{path}: a {format_bytes(size)} pickle is more than memlab view "
                            f"opens whole ({format_bytes(FULL_OPEN_LIMIT)}, ~7 times that in "
                            "memory); give --window START:END to read part of its trace, e.g. "
                            "--window 0s:30s or --window 0:2000000")


def _is_result(data: Any) -> bool:
    if isinstance(data, list):
        return bool(data) and all(_is_result(x) for x in data)
    return isinstance(data, dict) and "schema" in data and "timeline" in data and "peak" in data


def _check_snapshot(path, data: Any) -> dict:
    if not isinstance(data, dict) or not ("device_traces" in data or "segments" in data):
        got = type(data).__name__
        keys = f" with keys {', '.join(map(str, list(data)[:5]))}" if isinstance(data, dict) else ""
        raise SnapshotError(f"{path} is a pickle of a {got}{keys}, not a PyTorch memory snapshot "
                            "(expected a dict with 'segments' and 'device_traces')")
    traces = data.get("device_traces") or []
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError(f"{path}: 'device_traces' is not a list of lists of entries")
    if not isinstance(data.get("segments") or [], list):
        raise SnapshotError(f"{path}: 'segments' is not a list")
    for t in traces:
        if t and not (isinstance(t[0], dict) and "action" in t[0]):
            raise SnapshotError(f"{path}: trace entries have no 'action'; not a memory snapshot")
    return data


def open_summary(path: str | Path, *, device: int | None = None, variant: str | None = None,
                 top: int = 20, freeze_gc: bool = True,
                 window: Window | str | None = None) -> list[SnapshotSummary]:
    """Read and summarize a file: one summary (a snapshot), or one per result in a JSON list.

    `window` (a `Window` or its text, '10s:20s', '0:1000000'): stream the pickle and summarize
    that part of the trace only, in memory that follows the window (lab.snapshots.stream).

    A big snapshot is millions of small dicts that live as long as the summary (the viewer
    inspects raw entries). They hold no cycles, but every full collection of the cyclic garbage
    collector would walk them all (~0.4 s a time, a visible stutter in the app). With
    `freeze_gc` they are moved out of its reach (`gc.freeze()`; reference counting still frees
    them when the summary goes).
    """
    if isinstance(window, str):
        try:
            window = parse_window(window)
        except WindowError as e:
            raise SnapshotError(str(e)) from None
    with gc_paused():
        out = (_open_window(path, device, top, window) if window is not None
               else _open_summary(path, device, variant, top))
    if freeze_gc and any(s.events > 100_000 for s in out):
        gc.freeze()
    return out


def _open_summary(path, device, variant, top) -> list[SnapshotSummary]:
    kind, data = read(path)
    if kind == "snapshot":
        traces = data.get("device_traces") or []
        if device is not None and device >= max(len(traces), 1) and not any(
                s.get("device") == device for s in data.get("segments") or []):
            raise SnapshotError(f"{path}: no device {device} in this snapshot "
                                f"(devices: {', '.join(map(str, range(len(traces)))) or 'none'})")
        try:
            return [summarize(data, device=device, file=str(path), top=top)]
        except MALFORMED as e:
            raise SnapshotError(f"{path}: malformed snapshot ({type(e).__name__}: "
                                f"{_one_line(e)})") from None
    results = result_dicts(path, data, variant)
    try:
        return [summarize_result(r, file=str(path), top=top) for r in results]
    except DecodeError as e:
        raise SnapshotError(f"{path}: {e}") from None
    except MALFORMED as e:
        raise SnapshotError(f"{path}: malformed result JSON ({type(e).__name__}: "
                            f"{_one_line(e)})") from None


def _open_window(path, device, top, window: Window) -> list[SnapshotSummary]:
    data, cuts, lost = read_window(path, window)
    traces = data.get("device_traces") or []
    if device is not None and device >= max(len(traces), 1):
        raise SnapshotError(f"{path}: no device {device} in this snapshot "
                            f"(devices: {', '.join(map(str, range(len(traces)))) or 'none'})")
    if device is None and cuts:  # the device with the most entries, as a full load picks it
        device = max(cuts, key=lambda d: cuts[d].total)
    cut = cuts.get(device if device is not None else 0)
    if cut is None:
        raise SnapshotError(f"{path}: --window {window.describe()}: this snapshot has no "
                            "allocation history to take a window of")
    if not cut.kept:
        raise SnapshotError(f"{path}: --window {window.describe()} holds none of device "
                            f"{device}'s trace entries (it spans {cut.span_text()})")
    try:
        s = summarize(data, device=device, file=str(path), top=top, cut=cut)
    except MALFORMED as e:
        raise SnapshotError(f"{path}: malformed snapshot ({type(e).__name__}: "
                            f"{_one_line(e)})") from None
    s.devices = {d: c.total for d, c in sorted(cuts.items())}
    s.notes.append(f"--window {window.describe()}: entries {cut.first:,} to "
                   f"{cut.first + cut.kept - 1:,} of {cut.total:,}; the peak, what was live there "
                   "and the counts are the window's")
    if lost:
        s.notes.append(f"{lost:,} stacks inside the window were shared with entries outside it "
                       "and were dropped: those entries show no stack")
    return [s]


def result_dicts(path, data: Any, variant: str | None) -> list[dict]:
    """The result objects of a result file (a comparison's `results`), `variant`'s only."""
    results = data.get("results", []) if isinstance(data, dict) and "results" in data else data
    results = results if isinstance(results, list) else [results]
    if not all(isinstance(r, dict) for r in results):
        raise SnapshotError(f"{path}: its results are not all JSON objects; give {ACCEPTS}")
    if variant is not None:
        names = [str(r.get("variant"))[:40] for r in results]
        results = [r for r in results if r.get("variant") == variant]
        if not results:
            raise SnapshotError(f"{path} has no variant {variant!r}; it has: {', '.join(names)}")
    return results


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else "damaged"
    return text if len(text) <= 120 else text[:117] + "…"


def _parse_stack(stack: str) -> list[dict]:
    """'dir/file.py:12 fn' -> [{'filename': 'dir/file.py', 'line': 12, 'name': 'fn'}]."""
    if not stack or ":" not in stack:
        return []
    loc, _, name = stack.partition(" ")
    filename, _, line = loc.rpartition(":")
    try:
        return [{"filename": filename, "line": int(line), "name": name}]
    except ValueError:
        return [{"filename": loc, "line": 0, "name": name}]


def summarize_result(d: dict, *, file: str = "", top: int = 20) -> SnapshotSummary:
    """The lab's own result (RunResult JSON) in the viewer's shape. Phases and categories here
    are the lab's own (recorded), not guesses."""
    r = result_from_dict(d)  # every field checked (DecodeError: one line)
    tl = r.timeline
    s = SnapshotSummary(source="memlab-result", file=file, events=tl.events,
                        title=f"{r.lesson} · {r.variant} · {r.mode} · {r.scale}")
    s.stacks = "python"
    s.guessed = False
    # x: event index (the lab's own axis, the same in every mode) scaled as if µs, so a viewer
    # can treat both sources alike; the unit says which
    s.x_unit = "event"
    s._t = list(tl.index)
    s._alloc = list(tl.live)
    s.timeline = Series(list(tl.index), list(tl.live))
    if tl.index:
        s.start_us, s.end_us = tl.index[0], tl.index[-1]
        s.start_bytes, s.end_bytes = tl.live[0], tl.live[-1]
    s.peak_bytes, s.peak_index, s.peak_phase = r.peak.bytes, r.peak.index, r.peak.phase
    s.peak_time_us = r.peak.index if r.peak.index >= 0 else None
    maker = next((b for b in r.blocks if b.alloc_index == r.peak.index), None)
    if maker is not None:
        s.peak_frames, s.peak_where = _parse_stack(maker.stack), maker.stack or fr.NO_STACK
    s.by_category = {k: v for k, v in sorted(r.peak.by_category.items(), key=lambda kv: -kv[1])
                     if v}
    groups: dict[str, list[int]] = {}
    for b in r.peak.top:
        g = groups.setdefault(b.stack or fr.NO_STACK, [0, 0])
        g[0] += b.nbytes
        g[1] += 1
    s.groups = [{"where": w, "bytes": b, "count": c}
                for w, (b, c) in sorted(groups.items(), key=lambda kv: -kv[1][0])]
    by_phase: dict[str, int] = {}
    for b in r.peak.top:
        by_phase[b.phase] = by_phase.get(b.phase, 0) + b.nbytes
    s.by_phase = by_phase
    s.live_count = len(r.peak.top)
    s.live_bytes = sum(b.nbytes for b in r.peak.top)
    s.live_at_peak = [Allocation(b.nbytes, b.stack or fr.NO_STACK, b.phase, b.category,
                                 None, None, _parse_stack(b.stack))
                      for b in sorted(r.peak.top, key=lambda b: -b.nbytes)[:top]]
    starts = list(tl.phase_starts)
    for k, (name, idx) in enumerate(starts):
        end = starts[k + 1][1] if k + 1 < len(starts) else (tl.index[-1] if tl.index else idx)
        s.bands.append(Band(name, idx, end))
    if r.allocator and r.allocator.reserved_timeline:
        rt = r.allocator.reserved_timeline
        s.notes.append("reserved bytes come from the CUDA allocator's trace (its own time axis)")
        s.reserved_peak_bytes = max(rt.live) if rt.live else None
        s.reserved_end_bytes = rt.live[-1] if rt.live else None
    if r.status == "oom":
        s.ooms.append(Oom(tl.index[-1] if tl.index else 0, None, 0, None, s.peak_where,
                          (r.error or "").splitlines()[0] if r.error else ""))
    if r.status not in ("ok", "oom"):
        s.notes.append(f"status {r.status}: {r.error or ''}".strip())
    s.notes.append("live at the peak: the largest storages only (the result keeps the top ones)")
    s.notes.extend(r.notes)
    return s


__all__ = ["ACCEPTS", "SnapshotError", "open_summary", "read", "result_dicts", "summarize_result"]
