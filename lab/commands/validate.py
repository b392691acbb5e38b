"""`memlab doctor --validate`: the lab run on the installed torch and transformers, with a
progress bar, and one verdict line per library (lab.dev.validate says how it judges).

The bar is drawn by hand (twenty lines) rather than with rich: the CLI must run where only torch
and transformers are installed, and rich comes only with Textual.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

from lab.commands import UsageError

WIDTH = 24  # the bar's cells


class Bar:
    """`[██████░░░░] 54/108 · lesson 08 variant bf16 · 1:12, about 1:40 left` on stderr,
    rewritten in place on a terminal; elsewhere (a log, CI) a line every tenth of the way."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.perf_counter()
        self._tenth = -1

    def show(self, done: int, total: int, label: str) -> None:
        elapsed = time.perf_counter() - self.started
        left = elapsed / done * (total - done) if done else None
        when = _clock(elapsed) + (f", about {_clock(left)} left" if left is not None else "")
        if self.tty:
            cells = round(WIDTH * done / total) if total else WIDTH
            text = f"[{'█' * cells}{'░' * (WIDTH - cells)}] {done}/{total} · {label} · {when}"
            width = shutil.get_terminal_size((100, 24)).columns - 1
            self.stream.write("\r\x1b[K" + text[:width])
        else:
            tenth = done * 10 // total if total else 10
            if tenth == self._tenth:
                return
            self._tenth = tenth
            self.stream.write(f"validating: {done}/{total} runs · {when}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}"


def validate_main(args) -> int:
    from lab.dev import validate as val
    from lab.measure import versions as V

    baseline = val.load_baseline()
    if baseline is None:
        raise UsageError(f"no validation baseline ({val.BASELINE_PATH.name}) in this install; "
                         "`memlab dev versions --baseline` writes it in a checkout")
    here = val.installed_versions()
    made = baseline["made_with"]
    print(f"memlab: validating torch {here['torch']}, transformers {here['transformers']}: "
          "every lesson variant in sim at seed scale (about 3 minutes), against the numbers of "
          f"torch {made['torch']}, transformers {made['transformers']}", file=sys.stderr)
    bar = Bar()
    labels: dict[str, str] = {}

    def on_case(i: int, n: int, case, numbers) -> None:
        labels[case.name] = case.label
        bar.show(i + (numbers is not None), n, case.label)

    try:
        rows = val.run_all(on_case)
    finally:
        bar.close()
    verdicts, unexplained = val.verdicts(baseline, rows, labels, here)
    record = val.record(verdicts, here)
    report = val.save_report(rows, verdicts, unexplained, here)
    if args.json:
        print(json.dumps({"versions": here, "baseline": made, "runs": len(rows),
                          "seconds": round(time.perf_counter() - bar.started, 1),
                          "verdicts": [{"library": v.library, "version": v.version,
                                        "outcome": v.outcome, "summary": v.summary}
                                       for v in verdicts],
                          "unexplained": unexplained, "report": str(report)}, indent=1))
    else:
        print(f"{len(rows)} runs in {_clock(time.perf_counter() - bar.started)}, compared with "
              f"torch {made['torch']} and transformers {made['transformers']}:")
        for v in verdicts:
            print(f"  {v.line()}")
        for line in unexplained:
            print(f"  moved on the baseline's own versions (the lab's code, not a library): "
                  f"{line}")
        passed = [v for v in verdicts if v.outcome in V.PASSED]
        if passed:
            print("recorded as validated here (the version note stops): "
                  + ", ".join(f"{v.library} {v.version}" for v in passed))
        print(f"record: {record}\nreport: {report}")
    return 1 if any(v.outcome == "moved" for v in verdicts) or unexplained else 0


__all__ = ["Bar", "validate_main"]
