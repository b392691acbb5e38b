"""The warm pool never hands a run to a worker that imported older code (an edit, an upgrade).

A warm worker imports `lab` when it starts, ahead of need; the pool key carries the client's
code stamp (lab.runner.proc.code_stamp), so a worker started before the code changed is stopped,
not used. Fake workers: no process starts here.
"""

from __future__ import annotations

import os
import threading

from lab.runner import pool as pool_mod
from lab.runner.pool import PoolKey, WarmPool
from lab.runner.proc import code_stamp


class FakeWorker:
    def __init__(self, key):
        self.key, self.killed = key, False
        self.ready = threading.Event()
        self.ready.set()

    def alive(self):
        return not self.killed

    def kill(self):
        self.killed = True


def fake_pool(monkeypatch) -> WarmPool:
    monkeypatch.setattr(WarmPool, "_spawn", lambda self, key: FakeWorker(key))
    return WarmPool(spares=2)


def test_a_new_code_stamp_stops_the_old_spares_and_never_uses_them(monkeypatch):
    pool = fake_pool(monkeypatch)
    old, new = PoolKey("py", "/root", None, "1:10"), PoolKey("py", "/root", None, "2:10")
    pool.top_up(old)
    spares = list(pool._idle[old])
    assert len(spares) == 2
    w = pool.take(new)
    assert w.key == new and w not in spares
    assert all(s.killed for s in spares) and old not in pool._idle
    assert all(s.key == new for s in pool._idle[new])


def test_other_checkouts_and_gpus_keep_their_spares(monkeypatch):
    pool = fake_pool(monkeypatch)
    other_root, other_gpu = PoolKey("py", "/other", None, "1:10"), PoolKey("py", "/root", "0", "1:10")
    pool.top_up(other_root)
    pool.top_up(other_gpu)
    pool.take(PoolKey("py", "/root", None, "2:10"))
    assert not any(w.killed for k in (other_root, other_gpu) for w in pool._idle[k])


def test_the_same_stamp_reuses_a_ready_spare(monkeypatch):
    pool = fake_pool(monkeypatch)
    key = PoolKey("py", "/root", None, "1:10")
    pool.top_up(key)
    spare = pool._idle[key][0]
    assert pool.take(key) is spare and not spare.killed


def test_the_stamp_moves_when_a_module_changes(tmp_path):
    pkg = tmp_path / "lab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 1\n")
    first = code_stamp(tmp_path)
    st = (pkg / "sub" / "b.py").stat()
    os.utime(pkg / "sub" / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert code_stamp(tmp_path) != first
    second = code_stamp(tmp_path)
    (pkg / "c.py").write_text("")  # a module added with an older time still counts
    os.utime(pkg / "c.py", ns=(0, 0))
    assert code_stamp(tmp_path) != second
    assert pool_mod.PoolKey("p", "r").code == ""  # an old client's runs: a key of their own
