"""Prints how late the app's event loop wakes up while a lesson's run streams events.

    python bench/ui_stall.py [--delay 0.01] [--repeat 3]

Given a replayed run streaming an event every `--delay` seconds (the fixture of lesson 01,
two variants), a probe on the event loop sleeps 5 ms at a time from the key press until the
run's last message is handled; the figure is how much later than 5 ms the worst wake-up came
(and the median). The UI freezes for a learner when this reaches ~100 ms. A figure, not a test:
a loaded machine makes it larger (tests never assert wall-clock times).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "tui"))


async def one_run(delay: float) -> tuple[float, float, int]:
    from lab.runner.replay import ReplayRunner
    from tui_helpers import RUNS, make_app, open_first_lesson

    runner = ReplayRunner(RUNS, delay_s=delay)
    app = make_app(runner)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        late: list[float] = []

        async def probe():
            while not screen.finished_runs:
                t0 = time.perf_counter()
                await asyncio.sleep(0.005)
                late.append(time.perf_counter() - t0 - 0.005)

        app.progress.commit_prediction(screen.lesson.id, 4.4)  # r runs at once, no prompt
        gc.collect()
        gc.freeze()
        try:
            task = asyncio.get_running_loop().create_task(probe())
            await pilot.press("r")
            await task
        finally:
            gc.unfreeze()
        await app.workers.wait_for_complete()
    return max(late), statistics.median(late), len(late)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.01, help="seconds between streamed events")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ["MEMLAB_HOME"] = tempfile.mkdtemp(prefix="memlab-bench-")
    print(f"event loop lateness during a replayed run (an event every {args.delay * 1e3:.0f} ms), "
          f"{os.cpu_count()} cores")
    for i in range(args.repeat):
        worst, median, n = asyncio.run(one_run(args.delay))
        print(f"  run {i + 1}: worst {worst * 1e3:6.1f} ms late, median {median * 1e3:5.2f} ms, "
              f"{n} wake-ups")


if __name__ == "__main__":
    main()
