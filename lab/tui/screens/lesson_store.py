"""A lesson's results on disk: what the Results tab showed last, so it survives a restart.

The lead and beside sets are saved through `Progress.save_results` (atomic). A result run
here is kept whole; an H200 recording is kept as a pointer and read again from the install.
"""

from __future__ import annotations

from lab.measure.result import RunResult
from lab.course.reference import load_reference

from ..provenance import CLASS, LIVE, RECORDING
from ..result_set import ResultSet


def save_sets(progress, lesson_id: str, lead: ResultSet, beside: ResultSet) -> None:
    entries = []
    for role, rs in (("lead", lead), ("beside", beside)):
        for r in rs.results:
            entries.append({"set": role, "how": RECORDING, "variant": r.variant}
                           if rs.how == RECORDING else
                           {"set": role, "how": rs.how, "result": r.to_dict()})
    try:
        progress.save_results(lesson_id, entries)
    except OSError:
        pass  # an unwritable data folder costs the restore, never the run


def load_sets(progress, lesson_id: str, root) -> tuple[ResultSet, ResultSet, str]:
    saved, entries = progress.load_results(lesson_id)
    found: dict[str, list[RunResult]] = {"lead": [], "beside": []}
    how = {"lead": LIVE, "beside": LIVE}
    recorded = None
    for e in entries:
        role = e.get("set")
        if role not in found:
            continue
        try:
            if e.get("how") == RECORDING:
                recorded = recorded if recorded is not None else load_reference(lesson_id, root)
                r = recorded.get(e.get("variant"))
                how[role] = RECORDING
            else:
                r = RunResult.from_dict(e["result"])
                how[role] = CLASS if e.get("how") == CLASS else LIVE
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
        if r is not None:
            found[role].append(r)
    return (ResultSet(found["lead"], how["lead"]), ResultSet(found["beside"], how["beside"]),
            saved)


__all__ = ["load_sets", "save_sets"]
