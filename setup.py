"""Build step only (the metadata is in pyproject.toml): ship the course inside the wheel.

The repository keeps `lessons/` and `assets/` at its top level (authors edit them there); a
wheel copies them to `lab/_course/`, where lab/paths.py finds them, so `pip install .` and
`pip install dist/*.whl` carry the whole course. Editable installs read the checkout instead.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
COURSE = ("lessons", "assets")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "screenshots")  # README images


class BuildWithCourse(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads lessons/ and assets/ from the checkout
        for name in COURSE:
            src = ROOT / name
            if not (src.is_dir() and any(src.iterdir())):
                raise SystemExit(f"memlab build: the course folder {src} is missing or empty; "
                                 "a wheel without it would have no lessons")
            dst = Path(self.build_lib) / "lab" / "_course" / name
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst, ignore=SKIP)


setup(cmdclass={"build_py": BuildWithCourse})
