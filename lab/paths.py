"""Where the course lives: `lessons/` and `assets/`, in a checkout or inside the installed wheel.

The repository keeps `lessons/` and `assets/` at its top level; building the wheel copies them
to `lab/_course/` (setup.py's build_py), so `pip install .` carries the whole course. An
editable install or a clone reads them from the checkout. Torch-free; nothing is checked at
import: a missing course is reported loudly where it is loaded (`lab.course.curriculum.load_course`).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SHIPPED_DIR = PACKAGE_DIR / "_course"  # inside an installed wheel
CHECKOUT_DIR = PACKAGE_DIR.parent  # a clone or an editable install: the repository root
COURSE_FOLDERS = ("lessons", "assets")


def course_root() -> Path:
    """The folder holding lessons/ and assets/: the wheel's copy first, then the checkout."""
    for root in (SHIPPED_DIR, CHECKOUT_DIR):
        if (root / "lessons" / "course.toml").is_file():
            return root
    return SHIPPED_DIR  # neither: the paths below do not exist and loading says so


COURSE_ROOT = course_root()
LESSONS_DIR = COURSE_ROOT / "lessons"
ASSETS_DIR = COURSE_ROOT / "assets"
REFERENCE_DIR = ASSETS_DIR / "reference"
# earlier H200 recordings a lesson still cites (what a superseded method measured), one folder
# per recording date beside reference/: superseded/<date>/<lesson-id>/<variant>.json
SUPERSEDED_DIR = ASSETS_DIR / "superseded"

__all__ = ["ASSETS_DIR", "COURSE_ROOT", "LESSONS_DIR", "REFERENCE_DIR", "SUPERSEDED_DIR",
           "course_root"]
