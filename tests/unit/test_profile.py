"""`memlab profile` (lab/profile), `memlab.track()` and `memlab.phase()`.

The bar (issue 14): `memlab profile --mode cpu -- python script.py` on a small script with a
known footprint reports exactly its bytes by category, and its peak line points at the
script's own file:line (tests/fixtures/profile/known_footprint.py). What a misbehaving script
gives (tests/fixtures/profile/misbehave.py) is checked in-process through the same experiment
the worker runs (lab/profile/script.py under measure), and once through a real worker
for a process that dies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.profile.run import CommandError, finish, parse_command
from ..stderr_lines import own_lines

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "profile"
KNOWN = FIX / "known_footprint.py"
MISBEHAVE = FIX / "misbehave.py"
D, H, B = 256, 1024, 64  # known_footprint.py's sizes


def _line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if marker in text)


def _cli(capsys, *argv):
    from lab.cli import main

    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own checks (a bad --timeout) exit from parse_args
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_known_footprint_exact_bytes_and_peak_line(capsys):
    # Given a script whose every tensor is known from its shapes (fp32, two steps, plain SGD)
    code, out, err = _cli(capsys, "profile", "--mode", "cpu", "--json", "--", "python",
                          str(KNOWN))
    assert code == 0, err
    r = json.loads(out)
    assert r["status"] == "ok" and r["lesson"] == "profile" and r["variant"] == "known_footprint.py"
    # the peak: backward 0 making W1's gradient, while dL/dh (a temporary) is still live
    assert r["peak"]["phase"] == "backward 0"
    assert r["peak"]["by_category"] == {
        "parameters": 2 * D * H * 4,  # two weights, no bias
        "gradients": 2 * D * H * 4,  # both made by the time W1's is allocated
        "inputs": B * D * 4,  # x, made before the first forward
        "activations": B * D * 4 + 4,  # `out` (held by the script's variable) and the loss
        "temporaries": B * H * 4 + 4,  # dL/dh and backward's seed gradient
    }
    assert r["peak"]["bytes"] == sum(r["peak"]["by_category"].values())
    maker = next(b for b in r["blocks"] if b["alloc_index"] == r["peak"]["index"])
    assert maker["stack"] == f"profile/known_footprint.py:{_line(KNOWN, 'PEAK_LINE')} <module>"
    assert [p["name"] for p in r["phases"]][:5] == ["model", "forward 0", "backward 0", "step 0",
                                                    "zero_grad 0"]
    assert "│ step 1 loss" in err  # the script's own output, shown as it ran


def _measure(how: str, timeout_s: float = 0.0, tmp_path=None, script: Path = MISBEHAVE,
             steps: int | None = None):
    """What the worker does, in this process: the script experiment under measure."""
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure
    from lab.profile import script as experiment

    args = [how] if how else []
    params = {"target": str(script), "module": False, "args": args, "timeout_s": timeout_s,
              "output_path": str(tmp_path / "out.txt") if tmp_path else None, "steps": steps}
    r = measure(experiment.script,
                VariantSpec("profile", "script", "", params, timing=False),
                backend_for("cpu"))
    return finish(r, parse_command(["python", str(script), *args]), [], timeout_s)


def test_custom_phase_and_clean_end(tmp_path):
    r = _measure("ok", tmp_path=tmp_path)
    assert r.status == "ok", r.error
    names = [p.name for p in r.phases]
    assert names[:5] == ["model", "forward 0", "backward 0", "step 0", "zero_grad 0"]
    assert "eval" in names  # memlab.phase("eval") inside the script
    ev = r.phase("eval")
    assert ev.delta_bytes == 64 * 128 * 4  # `kept`: what the phase left behind
    assert "done" in (tmp_path / "out.txt").read_text()


@pytest.mark.parametrize("how, status, error, note", [
    ("raise", "error", "ValueError: boom", "raised ValueError at misbehave.py:{RAISE_LINE}"),
    ("exit0", "ok", None, "sys.exit(0) at misbehave.py"),
    ("exit3", "error", "the script exited with code 3 at misbehave.py", None),
])
def test_a_script_that_stops_early_is_a_result(how, status, error, note):
    r = _measure(how)
    assert r.status == status, r.error
    if error:
        assert error in r.error and "\n" not in r.error
    if note:
        note = note.replace("{RAISE_LINE}", str(_line(MISBEHAVE, "RAISE_LINE")))
        assert any(note in n for n in r.notes), r.notes
    # what ran before is measured: the first step's phases and AdamW's state
    assert {"forward 0", "backward 0", "step 0"} <= {p.name for p in r.phases}
    assert r.peak.by_category.get("optimizer_state", 0) >= 2 * 128 * 128 * 4


def test_the_tutorial_order_names_each_step_once_and_a_step_limit_says_the_rest_did_not_run(
        tmp_path):
    # Given zero_grad(); backward(); step() in a loop of 3 and --steps 2
    r = _measure("", tmp_path=tmp_path, script=FIX / "tutorial_order.py", steps=2)
    assert r.status == "ok", r.error
    assert [p.name for p in r.phases] == [
        "model", "forward 0", "zero_grad 0", "backward 0", "step 0", "data 1", "forward 1",
        "zero_grad 1", "backward 1", "step 1"]
    stop = next(n for n in r.notes if n.startswith("stopped after 2 optimizer steps"))
    assert "did not run" in stop
    assert "after the loop" not in (tmp_path / "out.txt").read_text()


def test_a_traceback_shows_the_scripts_frames_not_memlabs(tmp_path):
    # Given a script that raises: the output shows Python's traceback from the script's line on
    r = _measure("raise", tmp_path=tmp_path)
    text = (tmp_path / "out.txt").read_text()
    assert r.status == "error"
    assert f'misbehave.py", line {_line(MISBEHAVE, "RAISE_LINE")}, in <module>' in text
    assert "ValueError: boom" in text
    assert "/lab/" not in text and "runpy" not in text, text


def test_a_syntax_error_points_at_the_users_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nx = torch.zeros(3\nprint(x)\n")
    out = tmp_path / "out"
    out.mkdir()
    r = _measure("", tmp_path=out, script=bad)
    text = (out / "out.txt").read_text()
    assert r.status == "error" and r.error.startswith("SyntaxError")
    assert any("raised SyntaxError at broken.py:2" in n for n in r.notes), r.notes
    assert 'broken.py", line 2' in text and "Traceback" not in text and "/lab/" not in text
    # the worker reported: no note that it died
    assert not any("the worker stopped before" in n for n in r.notes), r.notes


def test_the_script_imports_are_read_from_its_files(tmp_path):
    from lab.profile.imports import imported, script_imports

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text("from . import layers\nimport peft.tuners\n")
    (tmp_path / "pkg" / "layers.py").write_text("import importlib\n"
                                                "importlib.import_module('einops')\n")
    (tmp_path / "train.py").write_text("import torch, numpy as np\nfrom pkg.model import M\n"
                                       "def f():\n    import transformers\n")
    cmd = parse_command(["python", str(tmp_path / "train.py")])
    assert script_imports(cmd) == {"torch", "numpy", "peft", "importlib", "einops",
                                   "transformers"}
    assert script_imports(parse_command(["python", str(KNOWN)])) >= {"torch"}
    from types import SimpleNamespace

    r = SimpleNamespace(lesson="profile", params={"imports": ["torch"]})
    assert imported(r, "torch") and imported(r, "transformers") is False
    assert imported(SimpleNamespace(lesson="01-linear", params={}), "torch") is None


def test_exit_codes_say_ok_failed_and_out_of_memory(capsys, monkeypatch):
    # Given a profile whose result is each status, the command's exit code names it
    from lab.commands import profile as command
    from lab.measure.result import DeviceInfo, RunResult

    for status, code in [("ok", 0), ("error", 1), ("timeout", 1), ("oom", 3)]:
        def fake(cmd, runner, mode, status=status, **kw):
            return RunResult(lesson="profile", variant=cmd.label, mode=mode, scale="",
                             device=DeviceInfo("CPU", "cpu"), status=status,
                             error=None if status == "ok" else "CUDA out of memory. Tried")

        monkeypatch.setattr("lab.profile.run.run_profile", fake)
        got, out, err = _cli(capsys, "profile", "--mode", "sim", "--", "python", str(KNOWN))
        assert got == code, (status, err)
        # said before the run: where the script stops
        assert "the script stops after 3 optimizer steps" in err
    assert command.EXIT_CODES == {"ok": 0, "oom": 3} and command.EXIT_FAILED == 1


def test_the_phase_table_has_a_time_column_only_where_time_was_measured():
    from lab.measure.result import DeviceInfo, PhaseStats, RunResult
    from lab.profile.text import render

    for mode, timed in [("cpu", True), ("sim", False)]:
        r = RunResult(lesson="profile", variant="t.py", mode=mode, scale="",
                      device=DeviceInfo("CPU", mode))
        r.phases = [PhaseStats("model", 0, 10, 10, 10, duration_s=0.5)]
        head = next(ln for ln in render(r).splitlines() if ln.startswith("phase"))
        assert ("time" in head) is timed, (mode, head)


def test_a_max_allocated_well_above_the_tensors_peak_is_explained_under_it():
    # a CNN with cudnn.benchmark: the allocator's max is the tensors plus cuDNN's search block,
    # so "peak: 11.4 GB" under "max allocated 17.0 GB" says why; a few MB of cuBLAS do not
    from lab.measure.result import AllocatorStats, DeviceInfo, Peak, RunResult
    from lab.profile.text import render

    def result(allocated: int) -> RunResult:
        r = RunResult(lesson="profile", variant="cnn.py", mode="sim", scale="",
                      device=DeviceInfo("H100", "sim"))
        r.peak = Peak(bytes=11_405_239_180, phase="forward 1")
        r.allocator = AllocatorStats(peak_allocated_bytes=allocated, predicted=True,
                                     untracked_peak_bytes=allocated - r.peak.bytes)
        return r

    text = render(result(16_981_821_952))
    assert "max allocated is 5.58 GB above this peak of the tensors" in text
    assert "above this peak" not in render(result(11_405_239_180 + 40 * 2**20))


@pytest.mark.slow  # waits for the timeout (~3.7 s): the full suite's
def test_timeout_stops_a_hang_even_when_the_script_swallows_exceptions():
    r = _measure("hang", timeout_s=3.0)
    assert r.status == "timeout" and "--timeout 3 s" in r.error
    assert any("stopped by --timeout at misbehave.py" in n for n in r.notes)
    assert r.phase("step 0") is not None and r.peak.bytes > 0


@pytest.mark.slow
def test_a_worker_that_dies_keeps_its_live_samples():
    from lab.profile.run import run_profile
    from lab.runner.client import SubprocessRunner

    cmd = parse_command(["python", str(MISBEHAVE), "die"])
    r = run_profile(cmd, SubprocessRunner(), "cpu", timeout_s=60)
    assert r.status == "error" and "exited with code 1" in r.error
    assert r.peak.bytes > 0 and any("live samples" in n for n in r.notes)


def test_track_in_process_and_phase_outside_is_a_no_op():
    import torch
    from torch import nn

    import memlab

    with memlab.phase("nothing tracks"):  # outside track(): does nothing
        pass
    model = nn.Linear(64, 32, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with memlab.track(model, opt, device="cpu") as t:
        x = torch.randn(16, 64)
        with memlab.phase("warm-up"):
            w = torch.empty(1000)
        del w
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    r = t.result
    assert r.ok and t.peak.bytes == t.peak_bytes > 0
    names = [p.name for p in r.phases]
    assert names[:6] == ["model", "warm-up", "model", "forward 0", "backward 0", "step 0"]
    assert r.phase("warm-up").peak_bytes - r.phase("warm-up").start_bytes == 4000
    # the weight existed before track(): counted from the start, as parameters
    assert r.peak.by_category["parameters"] == 64 * 32 * 4
    assert r.peak.by_category["optimizer_state"] == 64 * 32 * 4  # the momentum buffer
    text = t.report()
    assert "peak" in text and "parameters" in text and "warm-up" in text
    # and the hooks are gone again
    assert torch.autograd.backward.__name__ == "backward"
    assert torch.optim.Optimizer.zero_grad.__name__ == "zero_grad"


@pytest.mark.parametrize("argv, expect", [
    (["profile", "--mode", "sim", "--gpu", "v100", "--", "python", str(KNOWN)],
     "no GPU preset 'v100'; the presets: t4,"),
    (["profile", "--mode", "cpu", "--gpu", "t4", "--", "python", str(KNOWN)],
     "--gpu names the card a sim run predicts for"),
    (["profile", "--mode", "sim", "--steps", "0", "--", "python", str(KNOWN)], "--steps"),
    (["profile", "--mode", "cpu", "--", "python", "nope.py"], "nope.py: no such file"),
    (["profile", "--mode", "cpu"], "what to profile?"),
    (["profile", "--mode", "cpu", "--", "python", "-X", "dev", str(KNOWN)], "not supported"),
    (["profile", "--mode", "cpu", "--timeout", "0", "--", "python", str(KNOWN)], "--timeout"),
])
def test_bad_input_one_line_exit_2(capsys, argv, expect):
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == "" and len(own_lines(err)) == 1 and expect in err, err


def test_parse_command_forms():
    assert parse_command(["--", "python3", "-u", str(KNOWN), "3"]).args == ["3"]
    m = parse_command(["python", "-m", "pkg.train", "--lr", "1"])
    assert m.module and m.target == "pkg.train" and m.args == ["--lr", "1"]
    assert parse_command([str(KNOWN)]).label == "known_footprint.py"
    with pytest.raises(CommandError):
        parse_command(["python", "-m"])


def test_profile_front_end_is_headless():
    code = ("import sys, memlab, lab.profile, lab.profile.run, lab.profile.text, "
            "lab.commands.profile; "
            "bad = [m for m in ('textual', 'plotext', 'rich', 'torch') if m in sys.modules]; "
            "sys.exit(f'imported {bad}' if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr or r.stdout
