"""lab.snapshots: safe loading, the summary (peak, live at peak, phases, OOMs), `memlab view`,
and the snapshot memlab writes for cpu/sim runs (trace_to_snapshot).

No GPU here, so the snapshots are built by hand in the shape `torch.cuda.memory._snapshot()`
returns (torch 2.1+: segments + device_traces, frames as {filename, line, name}; with
stacks="all", C++ frames interleaved). A real one recorded on an H200 is picked up from
tests/fixtures/h200_snapshot.pickle when it is there.
"""

from __future__ import annotations

import builtins
import json
import os
import pickle
import pickletools
import subprocess
from pathlib import Path

import pytest

from lab.snapshots import RefusedPickle, SnapshotError, load_plain, open_summary, summarize
from ..stderr_lines import own_lines

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "h200_snapshot.pickle"

SITE = "/opt/conda/lib/python3.11/site-packages/torch"
MiB, KiB = 2**20, 2**10
U_TRAIN = {"filename": "/home/u/train.py", "line": 30, "name": "main"}
U_STEP = {"filename": "/home/u/train.py", "line": 41, "name": "main"}
U_MODEL = {"filename": "/home/u/model.py", "line": 12, "name": "forward"}
T_MOD = {"filename": f"{SITE}/nn/modules/module.py", "line": 1747, "name": "_call_impl"}
T_LIN = {"filename": f"{SITE}/nn/modules/linear.py", "line": 125, "name": "forward"}
T_LIN_INIT = {"filename": f"{SITE}/nn/modules/linear.py", "line": 105, "name": "__init__"}
T_OPT = {"filename": f"{SITE}/optim/adam.py", "line": 400, "name": "_multi_tensor_adam"}
T_OPT_STEP = {"filename": f"{SITE}/optim/optimizer.py", "line": 485, "name": "wrapper"}

A = {k: (i + 1) << 24 for i, k in enumerate("W X A1 A2 G S1 S2 P Q".split())}  # addresses


def _e(action, addr, size, t, frames=()):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": list(frames)}


def _free(name, size, t, frames=()):
    return [_e("free_requested", A[name], size, t, frames), _e("free_completed", A[name], size,
                                                                t, frames)]


def _seg(name, total, blocks):
    addr = A[name]
    out = []
    for size, state, frames in blocks:
        out.append({"address": addr, "size": size, "requested_size": size, "state": state,
                    "frames": list(frames)})
        addr += size
    active = sum(b["size"] for b in out if b["state"] != "inactive")
    return {"device": 0, "address": A[name], "total_size": total, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "allocated_size": active,
            "active_size": active, "requested_size": active, "is_expandable": False,
            "blocks": out}


FWD = [T_LIN, T_MOD, U_MODEL, T_MOD, U_TRAIN]
OPT = [T_OPT, T_OPT_STEP, U_STEP]
INIT = [T_LIN_INIT, U_TRAIN]
# P (4 KiB) and Q (1 KiB) were allocated before recording began: P is freed after the peak,
# Q is still live at the end. Expected peak: everything below is live after entry 9.
EXPECTED_PEAK = 4 * KiB + 1 * KiB + MiB + 512 * KiB + 256 * KiB + MiB + MiB + MiB


def python_snapshot() -> dict:
    trace = [
        _e("segment_alloc", A["W"], 2 * MiB, 100, INIT),
        _e("alloc", A["W"], MiB, 101, INIT),  # 1: weights
        _e("alloc", A["X"], 512 * KiB, 110, [U_TRAIN]),  # 2: a batch
        _e("alloc", A["A1"], 256 * KiB, 120, FWD),  # 3: forward
        _e("alloc", A["A2"], 256 * KiB, 121, FWD),  # 4: forward
        _e("alloc", A["G"], MiB, 130),  # 5: autograd thread: no Python stack
        *_free("A1", 256 * KiB, 131),  # 6, 7
        _e("alloc", A["S1"], MiB, 140, OPT),  # 8: optimizer state
        _e("alloc", A["S2"], MiB, 141, OPT),  # 9: the peak
        {"action": "oom", "size": 8 * 2**30, "device_free": 100 * MiB, "stream": 0,
         "time_us": 150, "frames": OPT},  # 10
        *_free("P", 4 * KiB, 160, [U_TRAIN]),  # 11, 12: before recording -> freed after peak
        *_free("A2", 256 * KiB, 170, FWD),  # 13, 14
    ]
    segments = [
        _seg("W", 2 * MiB, [(MiB, "active_allocated", INIT), (MiB, "inactive", ())]),
        _seg("X", 512 * KiB, [(512 * KiB, "active_allocated", [U_TRAIN])]),
        _seg("A1", 512 * KiB, [(512 * KiB, "inactive", ())]),
        _seg("G", MiB, [(MiB, "active_allocated", ())]),
        _seg("S1", MiB, [(MiB, "active_allocated", OPT)]),
        _seg("S2", MiB, [(MiB, "active_allocated", OPT)]),
        _seg("Q", 2 * MiB, [(KiB, "active_allocated", [U_TRAIN]), (2 * MiB - KiB, "inactive", ())]),
    ]
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {}}


CPP_ALLOC = {"filename": "??", "line": 0,
             "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"}
CPP_MM = {"filename": "/pytorch/aten/src/ATen/native/cuda/Blas.cpp", "line": 231,
          "name": "at::native::addmm_out_cuda_impl"}
CPP_ENGINE = {"filename": "/pytorch/torch/csrc/autograd/engine.cpp", "line": 1101,
              "name": "torch::autograd::Engine::thread_main"}
CPP_MMB = {"filename": "/pytorch/torch/csrc/autograd/generated/Functions.cpp", "line": 77,
           "name": "torch::autograd::generated::MmBackward0::apply"}


def cpp_snapshot() -> dict:
    """stacks="all": C++ frames innermost, Python frames where the interpreter was."""
    fwd = [CPP_ALLOC, CPP_MM, T_LIN, T_MOD, U_MODEL, U_TRAIN]
    bwd = [CPP_ALLOC, CPP_MMB, CPP_ENGINE]
    trace = [
        _e("segment_alloc", A["W"], 4 * MiB, 10, fwd),
        _e("alloc", A["W"], MiB, 11, fwd),
        _e("alloc", A["X"], 2 * MiB, 20, bwd),  # the peak: a gradient made by MmBackward0
        *_free("W", MiB, 30, fwd),
    ]
    return {"segments": [], "device_traces": [[], trace]}  # recorded on device 1


# ---- the restricted unpickler ------------------------------------------------------------------
class _Reduce:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def _evil_pickles(target: Path) -> dict[str, bytes]:
    cmd = f"echo pwned > {target}"
    out = {}
    for proto in (0, 2, 4, 5):
        out[f"os.system p{proto}"] = pickle.dumps(
            {"segments": [], "device_traces": [[_Reduce(os.system, cmd)]]}, protocol=proto)
        out[f"open p{proto}"] = pickle.dumps(_Reduce(builtins.open, str(target), "w"),
                                             protocol=proto)
    out["eval"] = pickle.dumps(_Reduce(eval, f"open({str(target)!r}, 'w')"), protocol=4)
    out["subprocess"] = pickle.dumps(_Reduce(subprocess.call, ["touch", str(target)]))
    return out


def test_refuses_any_global_before_it_runs(tmp_path):
    target = tmp_path / "written-if-executed"
    for name, data in _evil_pickles(target).items():
        with pytest.raises(RefusedPickle) as info:
            load_plain(data)
        assert "\n" not in str(info.value), name
        assert not target.exists(), f"{name}: the pickle ran"


def test_refused_file_is_a_one_line_snapshot_error(tmp_path):
    target = tmp_path / "written-if-executed"
    path = tmp_path / "evil.pickle"
    path.write_bytes(_evil_pickles(target)["os.system p4"])
    with pytest.raises(SnapshotError) as info:
        open_summary(path)
    msg = str(info.value)
    assert "refused" in msg and "system" in msg and "\n" not in msg
    assert not target.exists()


def test_plain_data_loads_in_every_protocol():
    value = {"a": [1, 2.5, None, True], "b": ("x", "é"), "c": {1, 2}, "big": 2**70}
    for proto in range(0, pickle.HIGHEST_PROTOCOL + 1):
        assert load_plain(pickle.dumps(value, protocol=proto)) == value
    # bytes have their own opcodes from protocol 3 on (before, they need `_codecs.encode`,
    # a function call, which is refused like any other global)
    with_bytes = {"b": b"\x00raw"}
    for proto in range(3, pickle.HIGHEST_PROTOCOL + 1):
        assert load_plain(pickle.dumps(with_bytes, protocol=proto)) == with_bytes


# ---- the summary ---------------------------------------------------------------------------------
def test_python_stack_snapshot_summary():
    s = summarize(python_snapshot(), top=20)
    assert s.events == 15 and s.stacks == "python"
    assert s.start_bytes == 5 * KiB  # P + Q, allocated before recording
    assert s.peak_bytes == EXPECTED_PEAK and s.peak_index == 9 and s.peak_time_us == 141
    # what was live there adds up to the peak, pre-recording blocks included
    assert s.live_bytes == EXPECTED_PEAK and s.live_count == 8
    assert s.peak_phase == "optimizer step"
    assert s.peak_where == "u/train.py:41 main"
    assert s.peak_frames[0]["name"] == "_multi_tensor_adam"
    groups = {g["where"]: g for g in s.groups}
    assert groups["u/train.py:41 main"]["bytes"] == 2 * MiB  # S1 + S2
    assert groups["u/model.py:12 forward"]["bytes"] == 256 * KiB  # A2 (A1 was freed)
    assert "(no Python stack)" in groups  # G, from the autograd thread
    assert s.by_phase["optimizer step"] == 2 * MiB
    assert s.by_phase["backward"] == MiB  # no stack, in a snapshot with stacks: autograd thread
    assert s.by_phase["forward"] == 256 * KiB
    assert s.by_phase["model setup"] == MiB
    assert s.by_category["optimizer_state"] == 2 * MiB
    notes = {a.note for a in s.live_at_peak}
    assert any("freed" in n for n in notes) and any("still live at the end" in n for n in notes)
    # reserved: 7.5 MiB of segments at the end, 2 MiB of them allocated during the trace
    assert s.reserved_end_bytes == 2 * MiB + 512 * KiB + 512 * KiB + 3 * MiB + 2 * MiB
    assert s.reserved.bytes[0] == s.reserved_end_bytes - 2 * MiB
    assert len(s.ooms) == 1 and s.ooms[0].requested_bytes == 8 * 2**30
    assert s.ooms[0].device_free_bytes == 100 * MiB
    assert s.end_bytes == EXPECTED_PEAK - 4 * KiB - 256 * KiB
    # the viewer's series keeps the peak whatever the width
    xs, ys = s.series(4)
    assert max(ys) == EXPECTED_PEAK


def test_json_shape():
    d = summarize(python_snapshot()).to_dict()
    json.dumps(d)  # plain JSON
    assert d["events"] == 15
    assert {"bytes", "time_us", "frames", "phase"} <= set(d["peak"])
    assert d["live_at_peak"][0]["bytes"] >= d["live_at_peak"][-1]["bytes"]
    assert all({"bytes", "frames"} <= set(a) for a in d["live_at_peak"])
    assert len(d["timeline"]["t_us"]) == len(d["timeline"]["bytes"]) > 0


def test_cpp_stacks_and_device_choice():
    s = summarize(cpp_snapshot())
    assert s.device == 1 and s.stacks == "python+c++"
    assert s.peak_bytes == 3 * MiB and s.peak_phase == "backward"
    assert s.peak_where == "torch::autograd::generated::MmBackward0::apply (C++)"
    [fwd] = [g for g in s.groups if g["bytes"] == MiB]
    assert fwd["where"] == "u/model.py:12 forward"  # C++ frames skipped to the user's frame
    # no Python frame on the autograd thread: the JSON keeps the C++ stack
    assert s.to_dict()["peak"]["frames"][1]["name"].endswith("MmBackward0::apply")


def test_no_history_shows_the_final_state():
    snap = python_snapshot()
    snap["device_traces"] = [[]]
    s = summarize(snap)
    assert s.events == 0 and s.peak_bytes == s.live_bytes == 4 * MiB + 512 * KiB + KiB
    assert any("no allocation history" in n for n in s.notes)


def test_legacy_block_history_frames():
    snap = {"segments": [{"device": 0, "address": 4096, "total_size": 2048, "stream": 0,
                          "blocks": [{"size": 2048, "state": "active_allocated",
                                      "history": [{"addr": 4096, "real_size": 2000,
                                                   "frames": [U_MODEL]}]}]}],
            "device_traces": []}
    s = summarize(snap)
    assert s.peak_bytes == 2048 and s.groups[0]["where"] == "u/model.py:12 forward"


# ---- files and the CLI -----------------------------------------------------------------------------
def test_open_summary_pickle_and_json(tmp_path):
    p = tmp_path / "snap.pickle"
    p.write_bytes(pickle.dumps(python_snapshot()))
    [s] = open_summary(p, freeze_gc=False)
    assert s.peak_bytes == EXPECTED_PEAK
    with pytest.raises(SnapshotError, match="no device 3"):
        open_summary(p, device=3)


def _cli(*argv, capsys):
    from lab.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("make, expect", [
    (lambda d: d / "missing.pickle", "no such file"),
    (lambda d: d, "is a folder"),
    (lambda d: _write(d / "list.pickle", pickle.dumps([1, 2, 3])), "not a PyTorch memory snapshot"),
    (lambda d: _write(d / "notes.txt", b"hello"), "neither a pickle nor JSON"),
    (lambda d: _write(d / "x.json", b'{"a": 1}'), "JSON but not"),
    (lambda d: _write(d / "trunc.pickle", pickle.dumps(python_snapshot())[:200]),
     "not a readable pickle"),
    (lambda d: _write(d / "evil.pickle", pickle.dumps(_Reduce(os.system, "true"))), "refused"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, make, expect):
    code, out, err = _cli("view", str(make(tmp_path)), "--json", capsys=capsys)
    assert code == 2 and out == ""
    assert len(own_lines(err)) == 1 and expect in err and own_lines(err)[0].startswith("memlab: error:")


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def test_cli_view_json_and_text(tmp_path, capsys):
    p = _write(tmp_path / "snap.pickle", pickle.dumps(python_snapshot()))
    code, out, err = _cli("view", str(p), "--json", "--top", "3", capsys=capsys)
    assert code == 0
    d = json.loads(out)
    assert d["events"] == 15 and d["peak"]["bytes"] == EXPECTED_PEAK
    assert len(d["live_at_peak"]) == 3 and d["peak"]["phase"] == "optimizer step"
    code, out, err = _cli("view", str(p), capsys=capsys)
    assert code == 0 and "peak 4.99 MB" in out and "u/train.py:41 main" in out
    # the out-of-memory is explained (lab.snapshots.oom): 100 MiB free on the GPU, 8 GiB asked
    assert "out of memory at" in out and "verdict: SHORTAGE" in out


# ---- trace_to_snapshot: what memlab writes for cpu/sim runs ------------------------------------------
# Opcodes the memory_viz page's own JavaScript unpickler (MemoryViz.js `unpickle`) understands.
JS_OPCODES = {"PROTO", "APPEND", "APPENDS", "LIST", "TUPLE", "NEWFALSE", "NEWTRUE", "NONE",
              "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME",
              "LONG1", "LONG_BINGET", "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "SETITEMS",
              "SETITEM", "DICT", "SHORT_BINUNICODE", "BINUNICODE", "STOP", "EMPTY_TUPLE",
              "TUPLE1", "TUPLE2", "TUPLE3", "BINFLOAT"}


def _tracked_trace():
    import torch
    from torch import nn

    from lab.measure.tracker import TensorTracker

    tr = TensorTracker()
    with tr:
        tr.phase = "model"
        model = nn.Linear(64, 32)
        tr.phase = "forward"
        y = model(torch.randn(16, 64))
        tr.phase = "backward"
        y.sum().backward()
        tr.phase = ""
    return tr.close()


def test_trace_to_snapshot_round_trip_and_memory_viz_opcodes(tmp_path):
    from lab.measure.result_parts import build_peak
    from lab.measure.snapshot import save_snapshot, trace_to_snapshot

    trace = _tracked_trace()
    snap = trace_to_snapshot(trace)
    path = tmp_path / "profile.pkl"
    save_snapshot(snap, str(path))
    used = {op.name for op, _, _ in pickletools.genops(path.read_bytes())}
    assert used <= JS_OPCODES, used - JS_OPCODES
    [s] = open_summary(path, freeze_gc=False)
    peak = build_peak(trace)
    assert s.peak_bytes == peak.bytes == s.live_bytes
    assert s.peak_phase == peak.phase and not s.guessed
    assert s.by_category == {k: v for k, v in peak.by_category.items() if v}
    # every block that memory_viz draws sits inside a segment (its segment view needs that)
    seg = {e["addr"]: e["size"] for e in snap["device_traces"][0] if e["action"] == "segment_alloc"}
    assert all(seg[e["addr"]] == e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc")
    cats = {e.get("category") for e in snap["device_traces"][0]}
    assert "unknown" in cats  # memory_viz's category legend needs it


def test_sims_workspaces_are_blocks_of_the_snapshot_at_their_moment():
    # Given sim's allocations that back no tensor (a cuDNN search's block, taken and given back
    # inside one op; a cuBLAS workspace kept to the end), when the trace becomes a snapshot, then
    # each is a block there, named, at the position it was made, so the snapshot's peak is the
    # allocator's (the search makes it) and a kept workspace is still live at the end
    from lab.measure.snapshot import trace_to_snapshot
    from lab.measure.sim.allocator.replay import Bounded

    trace = _tracked_trace()
    n = len(trace.events)
    search = Bounded(("cudnn search", "grad_input"))
    trace.extras += [(n // 2, "alloc", search, 5 << 30), (n // 2, "free", search, 5 << 30),
                     (n // 2, "alloc", ("cublas", "autograd"), 32 << 20)]
    snap = trace_to_snapshot(trace)
    entries = snap["device_traces"][0]
    made = [e for e in entries if e["action"] == "alloc" and e["category"] == "other"]
    assert [(e["size"], e["frames"][0]["name"]) for e in made] == [
        (5 << 30, "cuDNN benchmark search (grad_input)"), (32 << 20, "cuBLAS workspace (autograd)")]
    assert made[0]["phase"] == trace.events[n // 2 - 1].phase
    live = peak = 0
    for e in entries:
        live += {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)
        peak = max(peak, live)
    assert peak > 5 << 30
    assert any(seg["total_size"] == 32 << 20 for seg in snap["segments"])


# ---- a real snapshot, when one was recorded ----------------------------------------------------------
@pytest.mark.skipif(not H200.exists(), reason="record tests/fixtures/h200_snapshot.pickle on a GPU")
def test_real_h200_snapshot():
    [s] = open_summary(H200, freeze_gc=False)
    assert s.events > 0 and s.peak_bytes > 0 and s.stacks != "none"
    assert s.live_bytes == s.peak_bytes  # the recovered live set adds up to the peak
    assert s.peak_frames and s.live_at_peak and s.live_at_peak[0].frames
    assert s.reserved_peak_bytes is None or s.reserved_peak_bytes >= s.peak_bytes
    d = s.to_dict()
    json.dumps(d)


def test_shown_stacks_leave_out_the_dispatch_machinery_between_an_op_and_its_allocation():
    # Given a stack as a lab run on the GPU records it (torch's op call and the lab's tracker, a
    # dispatch mode, sit innermost), when it is shown, then those frames are left out and the
    # program's own frames come first; a stack of only such frames is still shown whole
    from lab.snapshots import frames as fr

    stack = [{"filename": "/v/site-packages/torch/_ops.py", "line": 841, "name": "__call__"},
             {"filename": "/repo/lab/measure/tracker.py", "line": 455, "name": "__torch_dispatch__"},
             {"filename": "/v/site-packages/torch/nn/modules/linear.py", "line": 112, "name": "__init__"},
             {"filename": "/repo/train.py", "line": 9, "name": "main"}]
    assert [f["name"] for f in fr.shown_frames(stack)] == ["__init__", "main"]
    assert fr.shown_frames(stack[:2]) == stack[:2]
    assert fr.where(stack) == "repo/train.py:9 main"
    # autograd's thread under the tracker: only machinery frames, so no user frame to name
    assert fr.where(stack[:2]) == fr.NO_STACK
