"""Merging one learner's progress written by several processes (two browser tabs, a tab and a
terminal): a three-way merge of plain records, no I/O.

`Progress.save` takes the file lock, reads the file again (`disk`), and merges into it what
this process changed since it last read or wrote the file (`base` -> `mine`); then it writes
the result atomically and adopts it. So a save never drops what another process saved
meanwhile. The rules, per record type:

- lesson records, field by field (any dataclass: fields added later merge the same way):
  a field this process did not change keeps the disk's value; one it changed takes its value;
  a counter (`COUNTERS`) adds this process's increment to the disk's count; a dict field
  merges key by key with the same rules.
- a change both processes made to the same field or key (a conflict): this process's value
  wins, except for what the learning loop commits once (`FIRST`): there the value saved first
  stays, with the fields that belong to it (`GROUPS`).
- a lesson this process removed (`reset`) is removed.
- run history: the disk's records, less those this process removed (by value), then this
  process's new ones (the same objects, so callers can tell their own runs by identity).
- `last_lesson`: this process's if it changed it, else the disk's.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from typing import Any

COUNTERS = {"runs", "playbacks"}  # this process's increments are added to the disk's count
# committed once (the app's learning loop): on a conflict the value saved first stays
FIRST = {"quiz", "prediction_gb", "revealed_at", "truth_gb"}
# fields that travel with another one when that one's conflict is settled
# (companions are declared after their field in the dataclass)
GROUPS = {"prediction_gb": ("prediction_at", "prediction_late"), "truth_gb": ("truth_source",)}
_MISSING = object()


@dataclass
class State:
    """What a progress file holds, as plain objects (LessonProgress, RunRecord)."""

    last_lesson: str | None = None
    lessons: dict[str, Any] = field(default_factory=dict)
    history: list[Any] = field(default_factory=list)

    def snapshot(self) -> State:
        """A copy to merge against later (records in history are not mutated: shared)."""
        return State(self.last_lesson, copy.deepcopy(self.lessons), list(self.history))


def merge(base: State, mine: State, disk: State, new_lesson) -> State:
    """`new_lesson(id)` makes an empty lesson record (what "absent" compares as)."""
    last = mine.last_lesson if mine.last_lesson != base.last_lesson else disk.last_lesson
    lessons: dict[str, Any] = {}
    for lid in list(disk.lessons) + [k for k in mine.lessons if k not in disk.lessons]:
        b, m, d = base.lessons.get(lid), mine.lessons.get(lid), disk.lessons.get(lid)
        if b is not None and m is None:
            continue  # removed here (reset)
        if m is None or (b is not None and m == b):
            if d is not None:
                lessons[lid] = d
            continue
        lessons[lid] = merge_record(b or new_lesson(lid), m, d or new_lesson(lid))
    return State(last, lessons, merge_history(base.history, mine.history, disk.history))


def merge_record(base, mine, disk):
    """Field by field three-way merge of one dataclass record (see the module's rules)."""
    out = replace(disk)
    settled: set[str] = set()
    for f in fields(mine):
        name = f.name
        if name in settled:
            continue
        b, m, d = getattr(base, name), getattr(mine, name), getattr(disk, name)
        if name in COUNTERS:
            setattr(out, name, d + (m - b))
        elif isinstance(m, dict):
            setattr(out, name, merge_dict(b or {}, m, d or {}, first=name in FIRST))
        elif m != b and not (name in FIRST and d != b):
            setattr(out, name, m)
            for companion in GROUPS.get(name, ()):
                if hasattr(mine, companion):
                    setattr(out, companion, getattr(mine, companion))
                    settled.add(companion)
        elif m != b:  # a conflict on a value committed once: the disk's stays, with its group
            settled.update(GROUPS.get(name, ()))
    return out


def merge_dict(base: dict, mine: dict, disk: dict, first: bool = False) -> dict:
    out = dict(disk)
    for key in set(base) | set(mine):
        b, m = base.get(key, _MISSING), mine.get(key, _MISSING)
        if m == b:
            continue
        d = disk.get(key, _MISSING)
        if first and d != b:
            continue  # another process set it first
        if m is _MISSING:
            out.pop(key, None)
        else:
            out[key] = m
    return out


def _key(rec) -> str:
    return json.dumps(rec.to_record(), sort_keys=True)


def merge_history(base: list, mine: list, disk: list) -> list:
    mine_ids = {id(r) for r in mine}
    base_ids = {id(r) for r in base}
    removed = Counter(_key(r) for r in base if id(r) not in mine_ids)
    new = [r for r in mine if id(r) not in base_ids]
    # reuse this process's objects for records it already had (identity marks "my runs")
    own: dict[str, list] = {}
    for r in mine:
        if id(r) in base_ids:
            own.setdefault(_key(r), []).append(r)
    out = []
    for r in disk:
        k = _key(r)
        if removed[k]:
            removed[k] -= 1
            continue
        out.append(own[k].pop(0) if own.get(k) else r)
    return out + new


__all__ = ["COUNTERS", "FIRST", "GROUPS", "State", "merge", "merge_dict", "merge_history",
           "merge_record"]
