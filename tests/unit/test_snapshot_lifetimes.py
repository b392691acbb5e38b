"""lab.snapshots.lifetimes: a raw snapshot's guessed categories, refined by when each block was
freed. The real H200 snapshot (tests/fixtures/h200_snapshot.pickle: an MLP, three AdamW steps)
peaks in the first optimizer step; a hand-built trace peaks in backward.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.snapshots import open_summary, summarize

H200 = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "h200_snapshot.pickle"
MiB = 2**20
SITE = "/usr/lib/python3.12/site-packages/torch"
U = {"filename": "/home/u/train.py", "line": 9, "name": "<module>"}
FWD = [{"filename": f"{SITE}/nn/modules/linear.py", "line": 125, "name": "forward"},
       {"filename": f"{SITE}/nn/modules/module.py", "line": 1747, "name": "_call_impl"}, U]
INIT = [{"filename": f"{SITE}/nn/modules/linear.py", "line": 105, "name": "__init__"}, U]
STEP = [{"filename": f"{SITE}/optim/adam.py", "line": 400, "name": "_multi_tensor_adam"}, U]
ZERO = [{"filename": f"{SITE}/optim/optimizer.py", "line": 990, "name": "zero_grad"}, U]


def _e(action, addr, size, t, frames=()):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": list(frames)}


def _free(addr, size, t, frames=()):
    return [_e("free_requested", addr, size, t, frames), _e("free_completed", addr, size, t, frames)]


@pytest.mark.skipif(not H200.exists(), reason="no recorded H200 snapshot")
def test_real_snapshot_workspaces_and_adam_intermediates():
    # Given the real H200 snapshot, peaking in AdamW's first step
    [s] = open_summary(H200, top=100, freeze_gc=False)
    cats = {}
    for a in s.live_at_peak:
        cats.setdefault((a.phase, a.bytes, a.category), 0)
        cats[(a.phase, a.bytes, a.category)] += 1
    W = 4096 * 4096 * 4
    # the cuBLAS workspaces (32 MiB from the first forward matmul, 32 MiB on the autograd
    # thread, 1 MiB cublasLt) live to the end of the recording: not activations, not gradients
    assert cats[("forward", 32 * MiB, "other")] == 1 and cats[("forward", MiB, "other")] == 1
    assert cats[("backward", 32 * MiB, "other")] == 1
    # the weights' gradients survive backward (freed by zero_grad) and have the weights' size
    assert cats[("backward", W, "gradients")] == 2
    # AdamW's exp_avg/exp_avg_sq (made in _init_group, kept) vs its foreach intermediates
    assert cats[("optimizer step", W, "optimizer_state")] == 4
    assert cats[("optimizer step", W, "temporaries")] == 2
    assert "activations" not in s.by_category  # every activation was freed by backward
    assert sum(s.by_category.values()) == s.peak_bytes


def test_backward_peak_activations_gradients_and_temporaries():
    # Given: weights, two steps; the peak is in the second backward, where the forward's
    # activation (A) is still saved, an activation gradient (T) is live and W's gradient (G) exists
    W, X, A, T, G, K, A2, T2, G2 = (k << 24 for k in range(1, 10))
    trace = [
        _e("alloc", W, MiB, 1, INIT),
        _e("alloc", K, 2 * MiB, 5, FWD),  # a workspace: never freed
        _e("alloc", A, 4 * MiB, 10, FWD),
        _e("alloc", T, 4 * MiB, 20),  # autograd thread: no stack
        _e("alloc", G, MiB, 21),
        *_free(T, 4 * MiB, 22), *_free(A, 4 * MiB, 23),
        _e("alloc", X, MiB, 30, STEP), *_free(X, MiB, 31, STEP),  # an adam intermediate
        *_free(G, MiB, 40, ZERO),
        _e("alloc", A2, 4 * MiB, 50, FWD),  # step 2
        _e("alloc", T2, 4 * MiB, 60),
        _e("alloc", G2, MiB, 61),  # the peak
        *_free(T2, 4 * MiB, 62), *_free(A2, 4 * MiB, 63),
    ]
    s = summarize({"segments": [], "device_traces": [trace]})
    assert s.peak_bytes == MiB + 2 * MiB + 4 * MiB + 4 * MiB + MiB
    assert s.by_category == {"activations": 4 * MiB, "temporaries": 4 * MiB, "other": 2 * MiB,
                             "parameters": MiB, "gradients": MiB}
