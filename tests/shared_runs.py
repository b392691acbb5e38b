"""One lesson run per test session, shared by the suite's xdist workers.

Several test files need the same lesson variant's result (a lesson's checks and claims in
test_lesson_effects, lesson 22's formulas and gloo ranks in test_many_gpus); each worker caching it
in memory still ran it once per worker. `shared(key, compute)` keeps the result as a pickle in a
folder all workers of this session share (beside their pytest temp folders): the first worker
to need it computes it under a file lock, the others wait for it or read it. Without xdist, the
in-memory cache of the caller is all there is.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")
SHARED_ENV = "MEMLAB_TEST_SHARED_RUNS"  # set by tests/conftest.py under xdist


def shared(key: tuple, compute: Callable[[], T]) -> T:
    folder = os.environ.get(SHARED_ENV)
    if not folder:
        return compute()
    from filelock import FileLock  # torch's own dependency

    name = hashlib.sha256(repr(key).encode()).hexdigest()[:24]
    path = Path(folder) / f"{name}.pickle"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            return pickle.loads(path.read_bytes())
        value = compute()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(value))
        tmp.replace(path)
        return value
