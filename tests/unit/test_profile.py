"""`memlab profile` (lab/profile), `memlab.track()` and `memlab.phase()`.

The bar (issue 14): `memlab profile --mode cpu -- python script.py` on a small script with a
known footprint reports exactly its bytes by category, and its peak line points at the
script's own file:line (tests/fixtures/profile/known_footprint.py). What a misbehaving script
gives (tests/fixtures/profile/misbehave.py) is checked in-process through the same experiment
the worker runs (lab/profile/script.py under measure_variant), and once through a real worker
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


def _measure(how: str, timeout_s: float = 0.0, tmp_path=None):
    """What the worker does, in this process: the script experiment under measure_variant."""
    from lab.measure.measure import measure_variant
    from lab.profile import script as experiment

    params = {"target": str(MISBEHAVE), "module": False, "args": [how], "timeout_s": timeout_s,
              "output_path": str(tmp_path / "out.txt") if tmp_path else None}
    r = measure_variant(experiment.script, lesson="profile", variant="script", mode="cpu",
                        scale="", params=params, timing=False)
    return finish(r, parse_command(["python", str(MISBEHAVE), how]), [], timeout_s)


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
