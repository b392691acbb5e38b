"""A lesson's results kept: on screen for this session (`KeptRuns`), and on disk, so what the
Results tab showed last survives a restart; each run of yours in the run history.

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


def keep_sets(progress, kept, lesson_id: str, lead: ResultSet, beside: ResultSet) -> None:
    """The sets now on screen: for this session's next visit, and on disk."""
    kept.sets[lesson_id] = (lead, beside)
    save_sets(progress, lesson_id, lead, beside)


def remember_run(progress, kept, lesson_id: str, result: RunResult, position: int,
                 gpu_memory: int | None) -> None:
    """A variant of a run of yours ended: into the run history, and this session's records
    (the Results tab's history leaves out the run on screen)."""
    record = progress.record_run(result, gpu_memory=gpu_memory)
    records = kept.records.setdefault(lesson_id, [])
    if position == 0:
        records.clear()
    records.append(record)


def earlier_runs(progress, kept, lesson_id: str) -> list:
    """The run history of a lesson, less the run on screen (this session's records of it)."""
    now = kept.records.get(lesson_id, [])
    return [h for h in progress.history_for(lesson_id) if not any(h is m for m in now)]


def restore(progress, kept, lesson_id: str, root) -> tuple[ResultSet, ResultSet, str | None]:
    """What the Results tab showed last: this session's, else the last session's (said so)."""
    if lesson_id in kept.sets:
        return (*kept.sets[lesson_id], None)
    lead, beside, saved = load_sets(progress, lesson_id, root)
    if lead:
        kept.sets[lesson_id] = (lead, beside)
    return lead, beside, f"from your last session ({saved[:16].replace('T', ' ')})"


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


__all__ = ["earlier_runs", "keep_sets", "load_sets", "remember_run", "restore", "save_sets"]
