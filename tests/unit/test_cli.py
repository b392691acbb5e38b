"""The CLI: bad input is one line and exit code 2; the seed numbers come out in simulation."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ..conftest import ROOT
from ..stderr_lines import own_lines
from lab.measure.result import SCHEMA


def memlab(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.mark.parametrize("args, says", [
    (["run", "99"], "no lesson '99'"),
    (["run", "01", "--variant", "fp8"], "has no variant 'fp8'"),
    (["run", "01", "--gpu-memory", "lots"], "--gpu-memory: 'lots' is not a size"),
    (["run", "01", "--gpu-memory", "-3GB"], "--gpu-memory"),
    (["run", "01", "--snapshot", "/nonexistent-dir/profile.pkl"], "does not exist"),
    (["run", "01", "--snapshot", "/proc/profile.pkl"], "not writable"),
    (["run", "01", "--mode", "tpu"], "invalid choice: 'tpu'"),
    (["run"], "which lesson?"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    proc = memlab(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert says in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_lesson_folder_missing_a_file_is_one_line(tmp_path):
    shutil.copytree(ROOT / "lessons" / "01-linear-baseline", tmp_path / "01-linear-baseline")
    (tmp_path / "01-linear-baseline" / "experiment.py").unlink()
    proc = memlab("run", "01", "--mode", "sim", env={"MEMLAB_LESSONS_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert len(own_lines(proc.stderr)) == 1
    assert "experiment.py" in proc.stderr and "missing" in proc.stderr


def test_list_shows_the_lessons():
    proc = memlab("list", "--json")
    assert proc.returncode == 0
    ids = [l["id"] for l in json.loads(proc.stdout)]
    assert ids[0] == "linear-baseline"


@pytest.mark.slow
def test_lesson_01_sim_seed_reports_the_seed_numbers_exactly():
    proc = memlab("run", "01", "--mode", "sim", "--scale", "seed", "--variant", "baseline", "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["schema"] == SCHEMA and res["mode"] == "sim" and res["step_time_s"] is None
    checks = {c["name"]: c for c in res["checks"]}
    assert set(checks) == {"weights", "input", "output"}
    for c in checks.values():
        assert c["measured_bytes"] == c["expected_bytes"]
    assert checks["weights"]["measured_bytes"] == 2_000_200_000  # 2.0 GB
    assert checks["input"]["measured_bytes"] == 200_000_000  # 0.2 GB
    assert checks["output"]["measured_bytes"] == 1_000_000_000  # 1.0 GB
    assert res["peak"]["bytes"] == 4_400_200_000 and res["peak"]["phase"] == "forward 1"  # phases count from 0


@pytest.mark.slow
def test_lesson_01_cpu_small_text_report(tmp_path):
    proc = memlab("run", "01", "--mode", "cpu", "--scale", "small")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Δ vs baseline" in out and "allocation #" in out and "no_grad" in out
    assert "peak" in out and "weights" in out


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_doctor_says_what_this_machine_gives():
    proc = memlab("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["python"] and info["torch"]
    assert info["lab_modes"] == (["cuda", "cpu", "sim"] if info["cuda_available"] else ["cpu", "sim"])


def test_memlab_as_a_process_leaves_its_heap_to_the_exit_and_a_caller_keeps_its_collector(
        monkeypatch):
    # Given main() as the `memlab` script calls it (no argv), then gc.freeze is registered for
    # the exit (the interpreter's exit would collect the whole heap again: ~1 s with torch); a
    # caller passing argv (a test, the app's own calls) registers nothing
    import atexit
    import gc

    from lab.cli import main

    registered = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: registered.append(fn))
    monkeypatch.setattr(sys, "argv", ["memlab", "--version"])
    with pytest.raises(SystemExit):
        main()
    assert registered == [gc.freeze]
    registered.clear()
    with pytest.raises(SystemExit):
        main(["--version"])
    assert registered == []
