"""`memlab serve` under a small class, on loopback: five learners' websockets, each predicting the
peak of lesson 01 and playing back its H200 recording; then the server is killed with SIGKILL
and started again. Every tab's app follows its server out (issue 24, defect 3: they used to
outlive it, one still running 465 s later), every learner's progress is intact and still theirs.

The same run with 30 learners, and the memory it takes per learner, is bench/serve_load.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")
if not Path("/proc/self/environ").exists():
    pytest.skip("finds the tabs' processes through /proc (Linux)", allow_module_level=True)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "serve_load.py"
LEARNERS = 5


def _bench():
    spec = importlib.util.spec_from_file_location("serve_load", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["serve_load"] = module
    spec.loader.exec_module(module)
    return module


def test_five_learners_then_a_killed_server_leave_nothing_behind_and_lose_nothing(tmp_path):
    report = asyncio.run(_bench().run_load(LEARNERS, tmp_path, timeout_s=240))
    # every learner predicted and saw the recording, each in their own app process
    assert report["recordings_seen"] == LEARNERS
    assert report["app_processes"] == LEARNERS
    # after SIGKILL of the server no tab's app is left (each followed its server)
    assert report["left_after_kill"] == 0
    # the progress files were whole and every learner's prediction and result kept
    for name, progress in report["progress_after_kill"].items():
        assert progress == {"readable": True, "damaged_lines": 0, "prediction_gb": 4.0,
                            "revealed": True}, name
    # started again: each browser's cookie still signs its learner in; nothing left at the end
    assert report["signed_in_after_restart"] == LEARNERS
    assert report["left_at_end"] == 0
    assert "Traceback" not in report["restart_output"]
