"""`memlab dev goldens --why "..."`: rewrite the sim goldens, and say why in their log.

    regenerate(why)   run the subset twice, refuse unless both agree, write the files, the
                      README table and a CHANGES.md entry (date, versions, every field that moved)
    check()           run the subset in this process, compare with the files (nothing written)

The two runs are the CLI's path and the test's: each lesson variant in a fresh worker, as
`memlab run LESSON --variant V --mode sim --scale seed --json` runs it (lab.runner's
SubprocessRunner, two at a time), and the whole subset in this process, in reverse order, under
the mechanism probe (lab.dev.sim_probe). Two processes, two hash seeds, two orders, two entry
points: a golden is written only when they give the same numbers, which is what makes a golden
exact (sim is deterministic) and the test's in-process path the CLI's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from lab.atomic import atomic_write

from .goldens import (GOLDENS_DIR, SCALE, SUBSET, Entry, PlainEntry, differences, dumps,
                      golden_document, lesson_of, load_golden, run_entry, run_probed, sim_mode,
                      versions)
from .goldens_h200 import baseline_golden_peak, h200_misses
from .sim_probe import MECHANISMS

CHANGES = GOLDENS_DIR / "CHANGES.md"
README = GOLDENS_DIR / "README.md"


class GoldenError(Exception):
    """The goldens cannot be written (the two runs disagree, a run failed): one line each."""


@dataclass
class Outcome:
    written: list[str]  # golden names
    changed: list[str]  # "name: field golden -> new" lines (also in CHANGES.md)
    h200: list[str]  # bars missed (the test fails on these too)


def regenerate(why: str, *, jobs: int = 2, say: Callable[[str], None] = print) -> Outcome:
    why = " ".join(why.split())
    if not why:
        raise ValueError("a reason is needed: --why \"what changed and why\"")
    say(f"running {len(SUBSET)} goldens in fresh workers ({jobs} at a time), as `memlab run "
        "--mode sim` runs them ...")
    fresh = run_in_workers(jobs, say)
    say("running them again in this process, in reverse order, under the mechanism probe ...")
    probed = {}
    for e in reversed(SUBSET):
        probed[e.name] = run_probed(e)
        say(f"  {e.name}: {probed[e.name][0]['status']}")
    disagree = [f"{name}: {field}: fresh worker {a!r}, this process {b!r}"
                for name, (fields, _made_with) in fresh.items()
                for field, a, b in differences(fields, probed[name][0])]
    if disagree:
        raise GoldenError("the two runs disagree, so nothing was written (sim should be "
                          "deterministic):\n" + "\n".join(disagree))

    changed, h200, docs = [], [], {}
    for e in SUBSET:
        fields, made_with = fresh[e.name]
        _, mechanisms, used_tf = probed[e.name]
        old = load_golden(e)
        doc = golden_document(e, fields, mechanisms, used_tf, made_with)
        if old is None:
            changed.append(f"{e.name}: new")
        else:
            changed += [f"{e.name}: {k}: {a!r} -> {b!r}" for k, a, b in differences(old, doc)]
        docs[e.name] = doc
    for e in SUBSET:  # the ratio bar reads the baseline's golden: judge the new ones
        base = docs.get(f"{e.lesson}/baseline")
        base_peak = base["sim"]["peak"]["bytes"] if base and e.variant != "baseline" else None
        h200 += h200_misses(e, docs[e.name]["sim"], base_peak)
    for e in SUBSET:
        atomic_write(e.path, dumps(docs[e.name]))
    for stale in stale_files():
        changed.append(f"{stale.parent.name}/{stale.stem}: removed (no longer in the subset)")
        stale.unlink()
    atomic_write(README, render_readme([docs[e.name] for e in SUBSET]))
    _log(why, changed, versions())
    return Outcome([e.name for e in SUBSET], changed, h200)


def check(say: Callable[[str], None] = print) -> list[str]:
    """Every difference between this process's runs and the files, and every missed bar."""
    problems = []
    for e in SUBSET:
        golden = load_golden(e)
        fields = run_entry(e)
        if golden is None:
            problems.append(f"{e.name}: no golden file ({e.path})")
            continue
        found = [f"{e.name}: sim.{k}: golden {a!r}, got {b!r}"
                 for k, a, b in differences(golden["sim"], fields)]
        found += h200_misses(e, fields, baseline_golden_peak(e))
        say(f"  {e.name}: {'ok' if not found else f'{len(found)} problem(s)'}")
        problems += found
    return problems


def run_in_workers(jobs: int, say: Callable[[str], None]) -> dict[str, tuple[dict, dict]]:
    """name -> (fields, versions the worker ran), each lesson variant in a fresh worker, the
    plain entries each in a fresh `python -m lab.dev.goldens_regen --fields NAME`."""
    from lab.runner.client import SubprocessRunner
    from lab.runner.loop import run_all
    from lab.runner.protocol import RunRequest

    from .goldens import result_fields

    mode = sim_mode()
    lessons = [e for e in SUBSET if isinstance(e, Entry)]
    requests = []
    for e in lessons:
        lesson = lesson_of(e)
        requests.append(RunRequest.for_lesson(lesson, e.variant, mode, SCALE, timing=True))

    def on_result(i: int, r) -> None:
        say(f"  {lessons[i].name}: {r.status} ({r.wall_s or 0:.1f} s)")

    results = run_all(SubprocessRunner(), requests, jobs=jobs, on_result=on_result)
    out = {}
    for e, r in zip(lessons, results):
        if r.status not in ("ok", "oom"):
            raise GoldenError(f"{e.name}: the worker's run ended {r.status}: {r.error}")
        out[e.name] = (result_fields(r), {"torch": r.torch_version,
                                          "transformers": r.transformers_version,
                                          "python": versions()["python"]})
    for e in SUBSET:
        if isinstance(e, PlainEntry):
            proc = subprocess.run([sys.executable, "-m", "lab.dev.goldens_regen", "--fields", e.name],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise GoldenError(f"{e.name}: the fresh process failed: {tail}")
            last = [line for line in proc.stdout.splitlines() if line.strip()][-1:]  # after any print
            out[e.name] = (json.loads(last[0] if last else "null"), versions())
            say(f"  {e.name}: {out[e.name][0]['status']}")
    return out


def stale_files() -> list:
    wanted = {e.path for e in SUBSET}
    return sorted(p for p in GOLDENS_DIR.glob("*/*.json") if p not in wanted)


def render_readme(docs: list[dict]) -> str:
    """The table of which golden takes which mechanism, from the files (tests check it is)."""
    lines = [
        "# Sim goldens",
        "",
        "Written by `memlab dev goldens --why \"...\"` (lab/dev/goldens_regen.py); do not edit by "
        "hand. Each `<lesson>/<variant>.json` holds one sim run's numbers, exactly; "
        "tests/unit/test_sim_goldens.py re-runs it, compares every field, and compares it with "
        "the H200 recording at the bars of docs/SIMULATION.md. Why each changed: CHANGES.md.",
        "",
        "## The subset",
        "",
        "| golden | why | depends on transformers |",
        "|---|---|---|",
    ]
    for d in docs:
        lines.append(f"| {d['golden']} | {d['why']} | {'yes' if d['depends_on_transformers'] else 'no'} |")
    lines += [
        "",
        "## Which golden takes which mechanism",
        "",
        "Found by the probe (lab/dev/sim_probe.py) while the golden was made; the test finds them "
        "again on every run.",
        "",
        "| mechanism | module | what | taken by |",
        "|---|---|---|---|",
    ]
    for m in MECHANISMS:
        by = [d["golden"] for d in docs if m.name in d["mechanisms"]]
        lines.append(f"| {m.name} | {m.module} | {m.what} | {', '.join(by) or '**none**'} |")
    made = docs[0]["made_with"] if docs else {}
    lines += ["", f"Made with torch {made.get('torch', '?')}, transformers "
                  f"{made.get('transformers', '?')}, Python {made.get('python', '?')} (the pins of "
                  ".ci/constraints.txt).", ""]
    return "\n".join(lines)


def _log(why: str, changed: list[str], made_with: dict[str, str]) -> None:
    head = "# Why the sim goldens changed\n\nAppended by `memlab dev goldens --why`, newest last.\n"
    old = CHANGES.read_text(encoding="utf-8") if CHANGES.is_file() else head
    day = datetime.now(timezone.utc).date().isoformat()
    entry = [f"\n## {day}: {why}\n",
             f"torch {made_with['torch']}, transformers {made_with['transformers']}, "
             f"Python {made_with['python']}; {len(SUBSET)} goldens.\n"]
    entry += [f"- {line}" for line in changed] or ["- no field changed"]
    atomic_write(CHANGES, old.rstrip("\n") + "\n" + "\n".join(entry) + "\n")


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.dev.goldens_regen --fields NAME`: one entry's fields as JSON (the fresh
    process `regenerate` runs a plain entry in)."""
    from .goldens import entry

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "--fields":
        print("usage: python -m lab.dev.goldens_regen --fields NAME", file=sys.stderr)
        return 2
    print(json.dumps(run_entry(entry(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
