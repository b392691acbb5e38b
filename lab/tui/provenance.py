"""Where every number on screen came from: lab.report.provenance's labels, kept with a set.

A result is one of: recorded on the H200 (a file in assets/reference, played back), a run on
the learner's GPU, a real run on the learner's CPU (usually small scale), a simulation, or (in a
served workshop) the instructor's run pushed to the class. `mode` and `device` say which machine
made it; whether it was *loaded* from a recording is known only to whoever loaded it, so it is
passed in. The words are lab.report's (one display policy for the app, the CLI and the exports);
only the instructor's run, a served workshop's, is named here.

Headless and cheap: versions come from the results themselves (no torch import on the UI
thread). The version rule: one line per lesson, shown only when the learner's run and the
recording took different code paths (`code_path_line`, lab.report.provenance.code_path_note).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.measure.result import RunResult
from lab.report.provenance import code_path_note, provenance, short_label

RECORDING, LIVE, CLASS = "recording", "live", "class"  # CLASS: the instructor's run, pushed


@dataclass(frozen=True)
class Source:
    """Where a set of results came from: `short` for table headers, `long` for titles."""

    short: str
    long: str
    recorded: bool


def source_of(r: RunResult, how: str) -> Source:
    if how == CLASS:  # a served workshop: played back like a recording, labelled as his run
        from lab.serve.classroom import instructor_label

        return Source("instructor's run", instructor_label(r), True)
    recorded = how == RECORDING
    return Source(short_label(r, recorded), provenance(r, recorded), recorded)


# ---- the version rule: one line per lesson, only when the code paths differ ----------------
VERSION_NOTE_RE = re.compile(r"^(torch|transformers) \d")  # the engine's per-run version notes
code_path_line = code_path_note


def is_version_note(note: str) -> bool:
    """The engine's "torch X: …" / "transformers X: …" notes: the one version line says it."""
    return bool(VERSION_NOTE_RE.match(note))


__all__ = ["CLASS", "LIVE", "RECORDING", "Source", "code_path_line", "is_version_note",
           "source_of"]
