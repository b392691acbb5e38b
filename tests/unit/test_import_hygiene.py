"""Import hygiene, one table: what each module may pull in, checked in fresh interpreters.

The headless core (engine, runner, curriculum, workloads, report, snapshots, playground) never
imports a UI library: it must run on a GPU box with only torch and transformers. The torch-free
modules never import torch either, so the CLI starts, lists and parses instantly and the app's
UI thread never waits 4 s for it. pyproject's import-linter contracts check the static imports;
this checks what really happens at import time (lazy imports, package __init__s, third parties).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

UI = ("textual", "rich", "plotext", "textual_plotext", "lab.tui")
TORCH = ("torch", "transformers")

# module (or a statement run after the imports) -> what it must not bring in
TORCH_FREE = [
    "lab.report", "lab.paths", "lab.atomic", "lab.course.curriculum", "lab.course.reference",
    "lab.course.progress", "lab.course.ground_truth",
    "lab.workloads", "lab.workloads.config", "lab.workloads.optim", "lab.workloads.registry",
    "lab.workloads.phases", "lab.workloads.fit", "lab.workloads.fit_sim",
    "lab.workloads.hf_config", "import lab.workloads.hf_config as h; h.shipped_models()",
    "lab.measure.sim.gpus",
    # the version rule: the CLI applies it before anything imports torch
    "import lab.measure.versions as v; v.refusal(); v.unvalidated('transformers')",
    "lab.playground", "lab.playground.text", "lab.report.export", "lab.report.text",
    "lab.snapshots", "lab.snapshots.text", "lab.measure.snapshot", "lab.measure.result",
    "lab.runner.client", "lab.runner.replay",
    # workshops: the class state, the instructor's view, progress merging
    "lab.serve.policy", "lab.serve.workshop", "lab.serve.classroom", "lab.serve.classview",
    "lab.serve.identity", "lab.serve.lifeline", "lab.decode", "lab.report.numbers",
    "lab.commands.serve_cmd", "lab.commands.class_cmd",
    "lab.cli",
]
# the CLI's startup: every subcommand's parser (compare's --help lists the combination tokens)
CLI_STARTUP = "import lab.cli; lab.cli.build_parser()"
# these need torch; imported in order in one interpreter (torch's import is the slow part), each
# checked right after its own import so a failure names the module that pulled the UI in
CORE_WITH_TORCH = [
    "lab.measure", "lab.measure.measure", "lab.measure.tracker", "lab.measure.cuda_allocator",
    "lab.measure.sim.dispatch.policy", "lab.runner.worker", "lab.workloads.train",
    "lab.workloads.tasks",
    "lab.workloads.experiment", "lab.workloads.gpu", "lab.commands.run", "lab.measure.sim_record",
    "lab.measure.distributed", "lab.workloads.parallel",
]

_PROBE = """
import importlib, json, sys
bad = {bad!r}
out = {{}}
for step in {steps!r}:
    before = {{m for m in bad if m in sys.modules}}
    if step.startswith("import "):
        exec(step)
    else:
        importlib.import_module(step)
    out[step] = sorted(m for m in bad if m in sys.modules and m not in before)
print(json.dumps(out))
"""


def _pulled_in(steps: list[str], bad: tuple[str, ...]) -> dict[str, list[str]]:
    code = _PROBE.format(bad=list(bad), steps=steps)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", TORCH_FREE + [CLI_STARTUP])
def test_torch_free_module_imports_neither_torch_nor_a_ui(module):
    # Given a fresh interpreter, when the module is imported, then neither torch nor a UI
    # library came with it.
    pulled = _pulled_in([module], UI + TORCH)[module]
    assert pulled == [], f"{module} pulled in {pulled}"


@pytest.mark.slow  # the quick tier's 2 minutes: ~4 CPU-s (lint-imports checks it statically)
def test_core_modules_import_no_ui():
    pulled = _pulled_in(CORE_WITH_TORCH, UI)
    assert {m: p for m, p in pulled.items() if p} == {}
    assert list(pulled) == CORE_WITH_TORCH  # every module was imported


def test_the_probe_can_fail():
    # the same probe notices a UI import (so a passing table means something)
    assert "textual" in _pulled_in(["import textual"], UI)["import textual"]


# the lesson screen's model and what it is given: headless (no Textual, no Rich) and torch-free,
# so its behaviours are unit tests (tests/unit/test_lesson_model.py); one interpreter for all
HEADLESS_TUI = ["lab.tui.result_set", "lab.tui.provenance", "lab.tui.lesson_model",
                "lab.tui.session", "lab.tui.technique_code"]


def test_the_lesson_screens_model_imports_no_ui_and_no_torch():
    pulled = _pulled_in(HEADLESS_TUI, ("textual", "rich", "plotext", "textual_plotext") + TORCH)
    assert {m: p for m, p in pulled.items() if p} == {}
    assert list(pulled) == HEADLESS_TUI


def test_every_module_of_lab_and_of_the_course_has_a_layer():
    # pyproject's "layers" contract names lab.course's and lab.report's modules one by one (they
    # sit at different heights), so import-linter's `exhaustive` cannot see a new one: this does
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    contract = next(c for c in tomllib.loads((root / "pyproject.toml").read_text())["tool"]
                    ["importlinter"]["contracts"] if c["id"] == "layers")
    named = {m.strip() for layer in contract["layers"] for m in layer.replace("|", ":").split(":")}
    assert not contract.get("ignore_imports")
    for package in ("lab", "lab.course", "lab.report"):
        folder = root.joinpath(*package.split("."))
        children = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        children |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
        children -= {"course", "report"} if package == "lab" else set()  # placed module by module
        missing = sorted(f"{package}.{c}" for c in children if f"{package}.{c}" not in named)
        assert not missing, f"give these a layer in pyproject's layers contract: {missing}"

