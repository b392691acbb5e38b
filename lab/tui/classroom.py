"""The app in a served workshop: follow the class, show the instructor's run, report state.

Installed by `MemLabApp.on_mount` (`install(app)`); does nothing unless the environment asks:

- `MEMLAB_CLASS=<workshop>` (set by `memlab serve`): follow the class state
  (lab/serve/classroom.py), polled once a second. `memlab class goto` opens that lesson (a new
  tab opens the class's current lesson too); `memlab class push` makes the instructor's run the
  lesson's result: shown at once to a learner who already predicted the peak (or whose lesson
  asks no prediction), else after their prediction, when they press r. r again runs it
  themselves. The run is labelled "run by your instructor on <GPU>".
- `MEMLAB_TEST_STATE=1`: write `<data folder>/test-state.json` whenever what is on screen
  changes (screen, lesson, tab, results): the browser test reads the app through it, since
  the served terminal is drawn on a canvas.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.text import Text

from lab.course.progress import atomic_write, data_dir
from lab.serve import policy
from lab.serve.classroom import Classroom, instructor_label

POLL_S = 1.0
STATE_S = 0.25
TEST_STATE_FILE = "test-state.json"


class ClassFollower:
    def __init__(self, app, workshop: Path):
        self.app = app
        self.room = Classroom(workshop)
        self.mtime = None
        self.goto_seq = 0
        self.push_seq: dict[str, int] = {}

    def start(self) -> None:
        state = self.room.read()
        self.push_seq = {k: int(v.get("seq", 0)) for k, v in state["pushes"].items()}
        self.goto(state, first=True)
        self.app.set_interval(POLL_S, self.poll)

    def poll(self) -> None:
        try:
            mtime = self.room.state_path.stat().st_mtime_ns
        except OSError:
            return
        if mtime == self.mtime:
            return
        self.mtime = mtime
        state = self.room.read()
        self.goto(state)
        for lesson_id, info in state["pushes"].items():
            if int(info.get("seq", 0)) > self.push_seq.get(lesson_id, 0):
                self.push_seq[lesson_id] = int(info.get("seq", 0))
                self.pushed(lesson_id)

    def goto(self, state: dict, first: bool = False) -> None:
        target = state.get("lesson") or {}
        seq = int(target.get("seq", 0))
        if seq <= self.goto_seq:
            return
        self.goto_seq = seq
        app = self.app
        try:
            lesson = app.course.find(target.get("id", ""))
        except LookupError:
            return
        screen = lesson_screen(app)
        if screen is not None and screen.lesson.id == lesson.id:
            return
        if screen is not None and screen.running:
            app.notify(f"Your instructor moved the class to {lesson.key} · {lesson.title}: "
                       "open it when your run ends (Esc cancels it).", timeout=10)
            return
        app.open_lesson(lesson)
        if not first:
            app.notify(f"Your instructor moved the class to {lesson.key} · {lesson.title}.")

    def pushed(self, lesson_id: str) -> None:
        screen = lesson_screen(self.app)
        if screen is None or screen.lesson.id != lesson_id or screen.running:
            return
        if predicted(self.app, screen.lesson):
            show_class_run(screen)  # else: their r asks for the prediction, then plays it
        else:
            self.app.notify("Your instructor ran this lesson: predict the peak (tab 2), then "
                            "press r to see their run.", timeout=10)


def lesson_screen(app):
    screen = app.screen
    return screen if hasattr(screen, "lesson") and hasattr(screen, "running") else None


def class_runs(app, lesson_id: str) -> list:
    follower = getattr(app, "class_follower", None)
    if follower is None:
        return []
    runs = follower.room.pushed(lesson_id)
    lesson = app.course.find(lesson_id)
    order = {v.name: i for i, v in enumerate(lesson.variants)}
    return sorted(runs.values(), key=lambda r: order.get(r.variant, len(order)))


def predicted(app, lesson) -> bool:
    """The learner committed a prediction, or the lesson asks for none."""
    if not any(q.kind == "predict_peak" for q in lesson.quiz):
        return True
    lp = app.progress.lessons.get(lesson.id)
    return lp is not None and lp.prediction_gb is not None


def show_class_run(screen) -> None:
    """The instructor's run becomes the lesson's result on this screen (played back like the
    H200 recordings, labelled as the instructor's)."""
    screen.play_class_run()


class StateWriter:
    """`test-state.json`: what is on screen, rewritten when it changes."""

    def __init__(self, app, path: Path):
        self.app, self.path, self.last = app, path, None

    def tick(self) -> None:
        state = describe(self.app)
        if state != self.last:
            self.last = state
            try:
                atomic_write(self.path, json.dumps(state, indent=1))
            except OSError:
                pass


def describe(app) -> dict:
    screen = app.screen
    focused = app.focused
    state = {"screen": type(screen).__name__, "learner": policy.learner(),
             "served": policy.served(), "focus": focused.id if focused is not None else None,
             "focus_type": type(focused).__name__ if focused is not None else None,
             "lesson": None, "tab": None, "running": False, "scale": None, "mode": None,
             "results": [], "beside": [], "class_run": None}
    if lesson_screen(app) is not None:
        state["lesson"] = screen.lesson.id
        state["running"] = bool(screen.running)
        state["class_run"] = getattr(screen, "class_run_label", None)
        try:
            state["tab"] = screen.query_one("#tabs").active
            controls = screen.query_one("#controls")
            state["mode"], state["scale"] = controls.mode, controls.scale
        except Exception:  # not composed yet
            pass
        rows = lambda results: [{"variant": r.variant, "status": r.status, "mode": r.mode,  # noqa: E731
                                 "scale": r.scale, "peak_bytes": r.peak.bytes,
                                 "device": r.device.name} for r in results]
        state["results"] = rows(screen.results)  # what leads: after `y` the learner's own run
        state["beside"] = rows(screen.beside.results)  # beside it: the H200 recording
    return state


def install(app) -> None:
    workshop = os.environ.get(policy.CLASS_ENV)
    if workshop:
        app.class_follower = ClassFollower(app, Path(workshop))
        app.class_follower.start()
    if os.environ.get(policy.TEST_STATE_ENV) == "1":
        writer = StateWriter(app, data_dir() / TEST_STATE_FILE)
        app.set_interval(STATE_S, writer.tick)
    name = policy.learner()
    if policy.served() and name:
        code = os.environ.get(policy.CODE_ENV)
        app.notify(f"Hello {name}: your progress is kept on the server under this name."
                   + (f" Your code is {code}: another browser needs it with your name."
                      if code else ""), timeout=30 if code else 6)


__all__ = ["ClassFollower", "describe", "install", "play_class_run", "show_class_run"]
