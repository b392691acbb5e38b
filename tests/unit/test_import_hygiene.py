"""The headless core never imports a UI library (it must run on a GPU box with only torch)."""

import subprocess
import sys

import pytest

CORE = [
    "lab.measure", "lab.measure.measure", "lab.measure.tracker", "lab.measure.cuda",
    "lab.measure.snapshot", "lab.runner.client", "lab.runner.worker", "lab.curriculum",
    "lab.experiments", "lab.cli", "lab.commands.run",
    # workshops (the serve branch): the class state, the instructor's view, progress merging
    "lab.progress", "lab.serve.policy", "lab.serve.workshop", "lab.serve.classroom",
    "lab.serve.classview", "lab.commands.serve_cmd", "lab.commands.class_cmd",
]
UI = ["textual", "plotext", "textual_plotext", "rich"]


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_no_ui(module):
    # Given a fresh interpreter, when the module is imported, then no UI library came with it.
    code = (f"import sys, {module}; bad = [m for m in {UI!r} if m in sys.modules]; "
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"{module} pulled in: {proc.stdout.strip()} {proc.stderr[-500:]}"
