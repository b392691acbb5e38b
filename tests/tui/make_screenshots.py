"""Write the README screenshots: `PYTHONPATH=. python tests/tui/make_screenshots.py`.

On a machine that says it has no CUDA GPU, what a laptop learner sees: `r` (after a prediction)
plays lesson 01's H200 recording from assets/reference, then `y` runs it "yourself" beside it
(the recorded worker output in tests/fixtures/runs: sim at seed scale, replayed).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["MEMLAB_HOME"] = tempfile.mkdtemp(prefix="memlab-shots-")

from tui_helpers import make_app, open_first_lesson, run_and_wait  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "assets" / "screenshots"


async def main(size=(120, 36)) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    from lab.course.reference import REFERENCE_DIR

    app = make_app(references=Path(REFERENCE_DIR))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.save_screenshot(str(OUT / "home.svg"))
        await open_first_lesson(pilot)
        await pilot.press("2")
        await pilot.pause()
        app.save_screenshot(str(OUT / "lesson.svg"))
        await run_and_wait(pilot, "r", prediction="4")  # the H200 recording plays
        await run_and_wait(pilot, "y")  # and your own (simulated) run beside it
        await pilot.press("3")
        await pilot.pause(0.3)
        app.save_screenshot(str(OUT / "results.svg"))
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("left", "left")
        await pilot.pause(0.3)
        app.save_screenshot(str(OUT / "inspector.svg"))
        await pilot.press("5")
        await pilot.pause(0.3)
        app.save_screenshot(str(OUT / "quiz.svg"))
    print("\n".join(sorted(p.name for p in OUT.glob("*.svg"))))


if __name__ == "__main__":
    asyncio.run(main())
