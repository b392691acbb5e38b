import os
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One compute thread per xdist worker (and per process it starts, which inherit this): with
    # `-n auto` there is a worker per core already, and torch's OpenMP pool of one thread per
    # core in every worker oversubscribes the box; its spinning threads then made a small
    # cpu-mode lesson run 3-4 times slower on CI's 2 cores. Set before torch is imported.
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest

from . import budget

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="session", autouse=True)
def _shared_runs_folder(tmp_path_factory):
    """Under xdist, a folder every worker of this session shares (tests/shared_runs.py): the
    parent of the workers' own temp folders, which pytest removes with old sessions."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from .shared_runs import SHARED_ENV

        os.environ[SHARED_ENV] = str(tmp_path_factory.getbasetemp().parent / "shared-runs")
    yield


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Progress and history go to a temp folder, never the developer's own data dir.

    Runs spawn their worker directly (MEMLAB_RUNNER=direct) unless a test asks for the runner
    service; any service a test started (it lives under MEMLAB_HOME) is stopped afterwards."""
    home = tmp_path / "memlab-home"
    monkeypatch.setenv("MEMLAB_HOME", str(home))
    monkeypatch.setenv("MEMLAB_RUNNER", "direct")
    yield
    if (home / "run" / "runner.pid").exists():
        from lab.runner.remote import stop_service

        stop_service()


def pytest_collection_modifyitems(config, items):
    _skip_off_pin(items)
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine: pytest -m cuda)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


# ---- the per-test time budget (tests/budget.py) ------------------------------------------------
def pytest_addoption(parser):
    budget.addoption(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    budget.start(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        budget.judge(item, report)
    elif report.when == "teardown":
        budget.log(item)


# ---- tests bound to the pinned versions by design ----------------------------------------------
def _skip_off_pin(items) -> None:
    """`@pytest.mark.pinned("textual", ...)`: a test whose expected output was made with the
    versions .ci/constraints.txt pins (a screen snapshot, exact sim bytes) skips, saying which
    version differs, where another is installed (.ci/unpinned; CI installs the pins)."""
    marked = [(item, m) for item in items for m in item.iter_markers("pinned")]
    if not marked:
        return
    from importlib.metadata import PackageNotFoundError, version

    from lab.dev.goldens import base_version, pinned

    pins = pinned()
    off: dict[str, str] = {}
    for item, marker in marked:
        for dist in marker.args:
            if dist not in off:
                try:
                    here = version(dist)
                except PackageNotFoundError:
                    here = "not installed"
                off[dist] = ("" if base_version(here) == base_version(pins.get(dist, here))
                             else f"{dist} {here} here, {pins[dist]} pinned")
        why = [off[d] for d in marker.args if off[d]]
        if why:
            item.add_marker(pytest.mark.skip(reason="version-bound by design (made with "
                                              ".ci/constraints.txt): " + "; ".join(why)))
