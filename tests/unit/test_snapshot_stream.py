"""`memlab view --window`: the streamed path (lab.snapshots.stream) against the full load.

Given small synthetic snapshots in the shape torch.cuda.memory._snapshot() returns (frames lists
shared between a block's events, as PyTorch shares one list per captured traceback), the
streamed summary of the whole trace is the full load's, and a window's columns are the full
load's sliced. Bad windows and pickles too big to open whole are one-line errors, exit 2.
"""

from __future__ import annotations

import gzip
import json
import pickle
import random

import pytest

from lab.snapshots import SnapshotError, open_summary
from lab.snapshots import load as load_mod
from lab.snapshots.stream import Window, WindowError, load_window, parse_window

from ..stderr_lines import own_lines
from .test_snapshots import _cli, _Reduce, python_snapshot

KiB = 2**10
FRAMES = [[{"filename": "/home/u/train.py", "line": 40 + k, "name": "main"},
           {"filename": "/home/u/model.py", "line": 100 + k, "name": "forward"}]
          for k in range(12)]


def loop_snapshot(steps: int = 60, seed: int = 3) -> dict:
    """A training loop: blocks allocated before recording (live to the end, or freed during it),
    per-step activations and temporaries, segments grown as needed, an OOM near the end."""
    rng = random.Random(seed)
    trace, t, nxt = [], [1_000_000], [1 << 32]
    live: dict[int, tuple[int, list]] = {}
    free_addrs: dict[int, list[int]] = {}

    def ev(action, addr, size, frames):
        t[0] += rng.randint(1, 40)
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                      "time_us": t[0], "frames": frames})

    def alloc(size):
        frames = list(rng.choice(FRAMES))  # one list per traceback, shared by its events
        pool = free_addrs.get(size)
        if pool:
            addr = pool.pop()
        else:
            addr, nxt[0] = nxt[0], nxt[0] + size
            ev("segment_alloc", addr, size, frames)
        ev("alloc", addr, size, frames)
        live[addr] = (size, frames)
        return addr

    def free(addr):
        size, frames = live.pop(addr)
        ev("free_requested", addr, size, list(rng.choice(FRAMES)))
        ev("free_completed", addr, size, frames)
        free_addrs.setdefault(size, []).append(addr)

    pre_freed = [(1 << 20) + k * 4096 for k in range(3)]  # allocated before recording
    for step in range(steps):
        acts = [alloc(KiB * rng.choice((4, 8, 16, 64))) for _ in range(rng.randint(3, 9))]
        if step == steps // 3:
            for a in pre_freed:
                ev("free_requested", a, 4096, [])
                ev("free_completed", a, 4096, [])
        for a in acts[::2]:
            free(a)
        tmp = alloc(KiB * 32)
        free(tmp)
        if step == steps - 5:
            t[0] += 1
            trace.append({"action": "oom", "size": 1 << 30, "device_free": 0, "stream": 0,
                          "time_us": t[0], "frames": FRAMES[0]})
    segs = [{"device": 0, "address": a, "total_size": s, "stream": 0, "segment_type": "large",
             "blocks": [{"address": a, "size": s, "requested_size": s,
                         "state": "active_allocated" if a in live else "inactive",
                         "frames": live[a][1] if a in live else []}]}
            for a, s in {e["addr"]: e["size"] for e in trace
                         if e["action"] == "segment_alloc"}.items()]
    segs.append({"device": 0, "address": 1 << 24, "total_size": 8192, "stream": 0,
                 "blocks": [{"address": 1 << 24, "size": 8192, "state": "active_allocated",
                             "frames": []}]})  # live from before recording to the end
    return {"segments": segs, "device_traces": [trace], "allocator_settings": {}}


def _write(tmp_path, snap, protocol=4, name="s.pickle"):
    p = tmp_path / name
    p.write_bytes(pickle.dumps(snap, protocol=protocol))
    return p


def _same(full, win) -> None:
    a, b = full.to_dict(), win.to_dict()
    for k in ("window", "notes"):
        a.pop(k), b.pop(k)
    assert a == b


@pytest.mark.parametrize("make, protocol", [(python_snapshot, 2), (loop_snapshot, 4),
                                            (loop_snapshot, 5)])
def test_the_whole_trace_streamed_is_the_full_load(tmp_path, protocol, make):
    p = _write(tmp_path, make(), protocol)
    [full] = open_summary(p, freeze_gc=False)
    [win] = open_summary(p, window="0:", freeze_gc=False)
    _same(full, win)
    assert win.window["entries"] == win.window["of"] == full.events


@pytest.mark.parametrize("lo, hi", [(0, 40), (57, 301), (300, None), (11, 12)])
def test_a_window_is_the_full_columns_sliced(tmp_path, lo, hi):
    # given a loop with blocks from before recording and before the window
    p = _write(tmp_path, loop_snapshot())
    [full] = open_summary(p, freeze_gc=False)
    # when an entry window and the same entries as a time window are streamed
    end = hi if hi is not None else full.events
    t0 = full._t[0]
    time_w = f"{full._t[lo] - t0}us:" + (f"{full._t[hi] - t0}us" if hi is not None else "")
    for w in (f"{lo}:{'' if hi is None else hi}", time_w):
        [win] = open_summary(p, window=w, freeze_gc=False)
        # then the columns are the full load's, sliced, from the same base
        want = [a + full._base for a in full._alloc[lo:end]]
        assert [a + win._base for a in win._alloc] == want
        assert list(win._t) == list(full._t[lo:end])
        assert win.window["first_entry"] == lo and win.events == end - lo
        assert [e["action"] for e in win._entries] == [e["action"] for e in full._entries[lo:end]]
        # and what was live at the window's peak adds up to it (blocks from before it included)
        assert win.peak_bytes == max(want) and win.live_bytes == win.peak_bytes
        assert win.reserved.bytes[0] >= 0


def test_entries_outside_the_window_leave_the_memo(tmp_path):
    p = _write(tmp_path, loop_snapshot())
    with open(p, "rb") as f:
        data, cuts, lost = load_window(f, parse_window("100:150"))
    [cut] = cuts.values()
    assert len(data["device_traces"][0]) == 50 and cut.first == 100 and lost == 0
    assert cut.total == len(loop_snapshot()["device_traces"][0])  # all counted, 50 kept
    # no trace entry left in the memo: the only references are the kept list's
    with open(p, "rb") as f:
        from lab.snapshots.stream import _WindowUnpickler

        u = _WindowUnpickler(f, parse_window("100:150"))
        u.load()
    assert not [v for v in u.memo.values() if type(v) is dict and "action" in v]


@pytest.mark.parametrize("text, kind, lo, hi", [
    ("10s:20s", "time", 10e6, 20e6), ("1.5s:", "time", 1.5e6, None),
    (":500ms", "time", None, 500e3), ("0:1000", "entries", 0, 1000), ("7:", "entries", 7, None),
    ("2min:3min", "time", 120e6, 180e6), ("5us:9us", "time", 5, 9),
])
def test_parse_window(text, kind, lo, hi):
    assert parse_window(text) == Window(kind, lo, hi, text)


BAD_WINDOWS = [
    ("abc", "give START:END"), ("5:2", "after the start"), ("1s:100", "both ends"),
    (":", "at least one end"), ("1.5:3", "whole number"), ("1h:2h", "give START:END"),
    ("1:2:3", "give START:END"), ("nan:", "give START:END"), ("=1:2", "give START:END"),
    ("-1:5", "give START:END"), ("x" * 500, "give START:END"),
]


def test_bad_window_is_one_line_exit_2(tmp_path, capsys):
    p = _write(tmp_path, python_snapshot())
    for text, expect in BAD_WINDOWS:
        with pytest.raises(WindowError, match=expect):
            parse_window(text)
        code, out, err = _cli("view", str(p), f"--window={text}", capsys=capsys)
        assert code == 2 and out == "" and len(own_lines(err)) == 1 and expect in err
        assert len(err) < 400


@pytest.mark.parametrize("make, window, expect", [
    (lambda d: _write(d, python_snapshot()), "1000:", "holds none of device 0's trace"),
    (lambda d: _write(d, python_snapshot()), "10s:", "spans 0.000 s, 15 entries"),
    (lambda d: _write(d, {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1,
                                                              "size": 8}]]}),
     "0s:1s", "no time_us"),
    (lambda d: _write(d, {"segments": [], "device_traces": [[]]}), "0:", "no allocation history"),
    (lambda d: (d / "r.json").write_text("{}") and d / "r.json", "0:", "not one"),
    (lambda d: _write(d, _Reduce(print, "x")), "0:", "refused"),
    (lambda d: (d / "t.pickle").write_bytes(pickle.dumps(loop_snapshot(8))[:900])
     and d / "t.pickle", "0:", "not a readable pickle"),
])
def test_window_on_a_file_it_cannot_serve_is_one_line_exit_2(tmp_path, capsys, make, window,
                                                             expect):
    p = make(tmp_path)
    code, out, err = _cli("view", str(p), "--window", window, "--json", capsys=capsys)
    assert code == 2 and out == "" and len(own_lines(err)) == 1 and expect in err


def test_a_pickle_past_the_limit_opens_only_with_a_window(tmp_path, capsys, monkeypatch):
    p = _write(tmp_path, loop_snapshot(10))
    gz = tmp_path / "s.pickle.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    monkeypatch.setattr(load_mod, "FULL_OPEN_LIMIT", p.stat().st_size - 1)
    for f in (p, gz):  # a gzip's inflated size counts (its trailer says it)
        with pytest.raises(SnapshotError, match="give --window START:END"):
            open_summary(f)
        code, out, err = _cli("view", str(f), capsys=capsys)
        assert code == 2 and len(own_lines(err)) == 1 and "--window" in err
        code, out, err = _cli("view", str(f), "--window", "0:", "--json", "--top", "2",
                              capsys=capsys)
        assert code == 0 and json.loads(out)["window"]["of"] == json.loads(out)["events"]


def test_view_text_and_help_name_the_window(tmp_path, capsys):
    p = _write(tmp_path, loop_snapshot())
    code, out, err = _cli("view", str(p), "--window", "100:200", "--no-timeline", capsys=capsys)
    assert code == 0 and "window 100:200: entries 100 to 199 of" in out
    assert "out of memory at" not in out  # explained only from the whole trace
    with pytest.raises(SystemExit):
        _cli("view", "--help", capsys=capsys)
    assert "--window START:END" in capsys.readouterr().out


def test_a_real_h200_snapshot_streams_as_it_loads():
    from .test_snapshots import H200

    if not H200.exists():
        pytest.skip("tests/fixtures/h200_snapshot.pickle is not here")
    [full] = open_summary(H200, freeze_gc=False)
    [whole] = open_summary(H200, window="0:", freeze_gc=False)
    _same(full, whole)
    lo, hi = full.events // 3, 2 * full.events // 3
    [win] = open_summary(H200, window=f"{lo}:{hi}", freeze_gc=False)
    assert [a + win._base for a in win._alloc] == [a + full._base for a in full._alloc[lo:hi]]
    assert win.live_bytes == win.peak_bytes and not any("dropped" in n for n in win.notes)
