"""A lesson's results on disk: what the Results tab showed last, so it survives a restart.

The lead and beside sets are saved through `Progress.save_results` (atomic). A result run
here is kept whole; an H200 recording is kept as a pointer and read again from the install.
"""

from __future__ import annotations

from lab.measure.result import RunResult
from lab.reference import load_reference

from ..provenance import LIVE, RECORDING
from ..widgets.tables import ResultSet


def save_sets(progress, lesson_id: str, lead: ResultSet, beside: ResultSet) -> None:
    entries = []
    for role, rs in (("lead", lead), ("beside", beside)):
        for r in rs.results:
            entries.append({"set": role, "how": RECORDING, "variant": r.variant}
                           if rs.how == RECORDING else
                           {"set": role, "how": LIVE, "result": r.to_dict()})
    try:
        progress.save_results(lesson_id, entries)
    except OSError:
        pass  # an unwritable data folder costs the restore, never the run


def load_sets(progress, lesson_id: str, root) -> tuple[ResultSet, ResultSet, str]:
    saved, entries = progress.load_results(lesson_id)
    sets = {"lead": ResultSet(), "beside": ResultSet()}
    recorded = None
    for e in entries:
        rs = sets.get(e.get("set"))
        if rs is None:
            continue
        try:
            if e.get("how") == RECORDING:
                recorded = recorded if recorded is not None else load_reference(lesson_id, root)
                r = recorded.get(e.get("variant"))
                rs.how = RECORDING
            else:
                r = RunResult.from_dict(e["result"])
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
        if r is not None:
            rs.results.append(r)
    return sets["lead"], sets["beside"], saved


__all__ = ["load_sets", "save_sets"]
