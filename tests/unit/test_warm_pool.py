"""The warm pool: workers forked from a key's zygote, and never one that imported older code.

A warm worker (or the zygote it is forked from) imports `lab` ahead of need; the pool key carries
the client's code stamp (lab.runner.proc.code_stamp), so a worker or zygote started before the
code changed is stopped, not used. Fake workers and zygotes: no process starts here
(tests/unit/test_zygote.py runs real ones).
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


class FakeZygote:
    def __init__(self, key, ready=True):
        self.key, self.killed, self.dead, self.forked = key, False, False, []
        self.ready = threading.Event()
        if ready:
            self.ready.set()

    def alive(self):
        return not (self.killed or self.dead)

    def fork(self):
        w = FakeWorker(self.key)
        self.forked.append(w)
        return w

    def kill(self):
        self.killed = True


def fake_pool(monkeypatch, zygotes=False, **zygote) -> WarmPool:
    monkeypatch.setattr(WarmPool, "_spawn", lambda self, key: FakeWorker(key))
    made = []

    def start(self, key):
        made.append(FakeZygote(key, **zygote))
        return made[-1]

    monkeypatch.setattr(WarmPool, "_start_zygote", start)
    pool = WarmPool(spares=2, zygotes=zygotes)
    pool.made = made
    return pool


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


def test_runs_are_forked_from_one_zygote_per_key_and_no_spare_imports(monkeypatch):
    pool = fake_pool(monkeypatch, zygotes=True)
    key = PoolKey("py", "/root", None, "1:10")
    pool.top_up(key)
    assert len(pool.made) == 1 and not pool._idle[key]  # one import, no spares of their own
    a, b = pool.take(key), pool.take(key)
    z = pool.made[0]
    assert z.forked == [a, b] and len(pool.made) == 1
    assert pool.ready_for(key)
    assert pool.count()["keys"]["cpu"]["zygote"] == "ready"


def test_a_new_code_stamp_stops_the_old_zygote(monkeypatch):
    pool = fake_pool(monkeypatch, zygotes=True)
    old, new = PoolKey("py", "/root", None, "1:10"), PoolKey("py", "/root", None, "2:10")
    pool.top_up(old)
    w = pool.take(new)
    assert pool.made[0].killed and pool.made[0].key == old
    assert w.key == new and pool.made[1].forked == [w]


def test_a_zygote_that_keeps_dying_while_importing_gives_way_to_cold_workers(monkeypatch):
    pool = fake_pool(monkeypatch, zygotes=True, ready=False)
    monkeypatch.setattr(FakeZygote, "alive", lambda self: False)  # dies before it is ready
    key = PoolKey("py", "/root", None, "1:10")
    workers = [pool.take(key) for _ in range(WarmPool.FAILURES_BEFORE_PAUSE + 1)]
    assert len(pool.made) == WarmPool.FAILURES_BEFORE_PAUSE  # then no more zygotes
    assert all(isinstance(w, FakeWorker) and not w.killed for w in workers)
    assert not any(z.forked for z in pool.made)


def test_closing_the_pool_stops_zygotes_and_spares(monkeypatch):
    pool = fake_pool(monkeypatch, zygotes=True)
    pool.top_up(PoolKey("py", "/root", None, "1:10"))
    pool.close()
    assert pool.made[0].killed and pool.count()["keys"] == {}


def test_gpu_runs_keep_pre_imported_spares_and_no_zygote(monkeypatch):
    """A CUDA worker must not be forked from a process an import may have initialised the
    driver in: GPU keys never get a zygote."""
    pool = fake_pool(monkeypatch, zygotes=True)
    gpu = PoolKey("py", "/root", "0", "1:10")
    pool.top_up(gpu)
    assert pool.made == [] and len(pool._idle[gpu]) == 2
    w = pool.take(gpu)
    assert pool.made == [] and isinstance(w, FakeWorker)
