"""The runner service's queue seen from the lesson screen: "waiting for GPU 0 — 2 ahead" in
the status line, and Esc cancels while the run is still waiting."""

from __future__ import annotations

import threading

import pytest

from lab.runner.client import failed_result
from lab.tui.screens import LessonScreen

from tui_helpers import answer_predict_prompt, make_app, open_first_lesson, text_of, wait_until


class QueuedRunner:
    """Waits in the queue until cancelled, as the service does while the GPU is taken."""

    def __init__(self):
        self.waiting = threading.Event()

    def run(self, req, on_event=None, cancel=None):
        on_event({"type": "status", "stage": "waiting", "text": "waiting for GPU 0 — 2 ahead",
                  "ahead": 2})
        self.waiting.set()
        cancel.wait(30)
        return failed_result(req, "linear-baseline", "cancelled", "cancelled while waiting")


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_waiting_in_the_gpu_queue_is_shown_and_esc_cancels_it():
    runner = QueuedRunner()
    app = make_app(runner)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_first_lesson(pilot)
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        await pilot.press("r")  # (no recordings in this app: r runs it; skip the prediction)
        await answer_predict_prompt(pilot, None)
        await wait_until(pilot, lambda: "2 ahead" in text_of(screen, "#status-text"), tries=500)
        assert "waiting for GPU 0 — 2 ahead" in text_of(screen, "#status-text")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not screen.running, tries=500)
        assert "Cancelled" in text_of(screen, "#status-text")
