"""stderr as the lab wrote it, without the lines a library can add (issue 33: a new
transformers made every command print a version note, and 75 tests that counted stderr lines
failed). Count `own_lines(err)`, never `err.count("\\n")`."""

from __future__ import annotations

import re

# "…/site-packages/x.py:12: FutureWarning: …", then the source line, indented
WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")
LIBRARY_NOTE = "memlab: note: "  # lab.measure.versions: a library newer than validated


def own_lines(err: str) -> list[str]:
    """The non-empty lines of `err` less version notes and Python warnings (with their source
    line)."""
    out, after_warning = [], False
    for line in err.splitlines():
        if after_warning and line.startswith(" "):
            after_warning = False
            continue
        after_warning = bool(WARNING.match(line))
        if after_warning or line.startswith(LIBRARY_NOTE) or not line.strip():
            continue
        out.append(line)
    return out
