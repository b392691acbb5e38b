"""The wheel ships the course: build it, install it into a fresh venv, run it from elsewhere.

Offline and fast: the wheel is built with this environment's setuptools (no build isolation),
and the fresh venv sees this environment's already-installed dependencies (torch, transformers,
Textual) through a .pth file pointing at a view of site-packages that leaves memlab's own
(editable) install out, so `lab` can only come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from ..conftest import ROOT
from ..stderr_lines import own_lines

pytestmark = pytest.mark.slow
LEFT_OUT = (".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
            "snapshot_report.html")


def _run(*cmd, cwd, env=None, timeout=300):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*LEFT_OUT))
    dist = tmp / "dist"
    build = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--no-index", "-q", "-w", dist, src, cwd=tmp)
    assert build.returncode == 0, build.stderr[-3000:]
    [wheel] = dist.glob("memlab-*.whl")

    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    # the dependencies, without memlab itself: a folder of links to site-packages' entries
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if entry.name != "lab" and not entry.name.startswith(("memlab", "__editable__")):
            (deps / entry.name).symlink_to(entry)
    purelib = _run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                   cwd=tmp).stdout.strip()
    (Path(purelib) / "deps.pth").write_text(str(deps) + "\n")
    inst = _run(sys.executable, "-m", "pip", "--python", py, "install", "--no-deps",
                "--no-index", "-q", wheel, cwd=tmp)
    assert inst.returncode == 0, inst.stderr[-3000:]
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMLAB_LESSONS_DIR")}
    env["MEMLAB_HOME"] = str(tmp / "home")
    env["MEMLAB_RUNNER"] = "direct"  # no runner service left behind in the temp home
    return {"wheel": wheel, "bin": env_dir / "bin", "py": py, "purelib": Path(purelib),
            "cwd": elsewhere, "env": env}


def test_the_wheel_holds_lessons_and_assets(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for lesson in (ROOT / "lessons").glob("[0-9][0-9]-*"):
        for f in ("lesson.toml", "lesson.md", "experiment.py"):
            assert f"lab/_course/lessons/{lesson.name}/{f}" in names
    assert "lab/_course/lessons/course.toml" in names
    assert "lab/_course/assets/corpus/genesis-kjv.txt" in names
    assert any(n.startswith("lab/_course/assets/reference/linear-baseline/") for n in names)
    assert "lab/tui/app.tcss" in names
    # the version table (the CLI reads it first) and what `memlab doctor --validate` compares with
    assert {"lab/measure/versions.json", "lab/dev/validation_baseline.json"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_memlab_list_and_run_from_another_directory(installed):
    where = _run(installed["py"], "-c", "import lab.paths as p; print(p.LESSONS_DIR)",
                 cwd=installed["cwd"], env=installed["env"])
    assert where.stdout.strip().startswith(str(installed["purelib"])), where.stdout + where.stderr
    listed = _run(installed["bin"] / "memlab", "list", "--json", cwd=installed["cwd"],
                  env=installed["env"])
    assert listed.returncode == 0, listed.stderr
    ids = [lesson["id"] for lesson in json.loads(listed.stdout)]
    assert len(ids) == len(list((ROOT / "lessons").glob("[0-9][0-9]-*"))) and ids[0] == "linear-baseline"
    ran = _run(installed["bin"] / "memlab", "run", "01", "--mode", "sim", "--scale", "seed",
               "--json", cwd=installed["cwd"], env=installed["env"])
    assert ran.returncode == 0, ran.stderr[-3000:]
    results = {r["variant"]: r for r in json.loads(ran.stdout)}
    assert results["baseline"]["status"] == "ok"
    assert results["baseline"]["peak"]["bytes"] == 4_400_200_000  # lesson 01's seed numbers


def test_a_missing_course_is_a_loud_error(installed):
    course = installed["purelib"] / "lab" / "_course"
    hidden = course.with_name("_course-hidden")
    course.rename(hidden)
    try:
        listed = _run(installed["bin"] / "memlab", "list", cwd=installed["cwd"],
                      env=installed["env"])
    finally:
        hidden.rename(course)
    assert listed.returncode == 2
    assert len(own_lines(listed.stderr)) == 1 and "no course" in listed.stderr
