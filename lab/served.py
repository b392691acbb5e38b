"""Whether this process is a lab served to browsers: `memlab serve` starts each tab's app with
MEMLAB_SERVED=1. A fact the lowest modules ask (lab.user_files bounds what a file may hold);
what a served lab may not do is lab.serve.policy's."""

from __future__ import annotations

import os

SERVED_ENV = "MEMLAB_SERVED"  # "1" in a process started by `memlab serve`


def served() -> bool:
    return os.environ.get(SERVED_ENV) == "1"


__all__ = ["SERVED_ENV", "served"]
