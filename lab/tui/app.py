"""`MemLabApp`: routing and lifecycle only. Screens and widgets do the rest.

The data sources are injected (memray's `TUIApp(reader)` pattern): a `Runner` (the real
runner service's client by default; tests pass a `ReplayRunner`), the `Course`, the `Progress`
store, and the GPU (detected in a thread at start-up unless given; `None` means no CUDA).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable

from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen

from lab.course.curriculum import Course, Lesson, load_course
from lab.measure.modes import ModeChoice, ModeError, choose
from lab.measure.result import RunResult
from lab.course.progress import NOT_STARTED, QUIZ_DONE, QUIZ_PASSED, Progress, data_dir
from lab.course.reference import REFERENCE_DIR, load_reference
from lab.report.units import capacity
from lab.serve.policy import served

from .commands import LessonCommands
from .session import KeptRuns, LessonDeps, Machine
from .widgets.fit import Fit
from .screens import (CalibrationScreen, ConfirmScreen, HelpScreen, HomeScreen, LessonScreen,
                      PathPromptScreen, TooSmallScreen)
from .screens.diff_view import open_diff

MIN_SIZE = (80, 24)
# what the machine gives (not a measuring mode: lab.measure.modes decides those)
DETECTING, GPU, NO_GPU = "detecting", "gpu", "none"
DETECT = object()  # default for `gpu`: look for a CUDA GPU at start-up


class MemLabApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "GPU Memory Lab"
    COMMANDS = App.COMMANDS | {LessonCommands}
    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        # not in the footer (it is full at 80 columns); listed in ? help and the palette
        Binding("g", "playground", "Playground", show=False),
        Binding("x", "challenges", "Challenges", show=False),  # lab/tui/screens/challenges.py
        Binding("o", "open_snapshot", "Open snapshot", show=False),
        Binding("ctrl+s", "save_svg", "Save screenshot (SVG)", show=False),
    ]

    device_state: reactive[str] = reactive(DETECTING)  # DETECTING | GPU | NO_GPU

    def __init__(self, runner: Any = None, course: Course | None = None,
                 progress: Progress | None = None, gpu: Any = DETECT,
                 reference_root: Path | str | None = None, playback_seconds: float = 0.6):
        super().__init__()
        if runner is None:  # the machine's runner service: one queue per GPU for every tab,
            from lab.runner.client import default_runner  # terminal and shell on the machine

            runner = default_runner()
        if served():  # a browser tab: only the work its server's limits allow (lab/serve/limits.py)
            from lab.serve.limits import limited

            runner = limited(runner)
        self.runner = runner
        self.course = course if course is not None else load_course()
        self.progress = progress if progress is not None else Progress.load()
        self.reference_root = Path(reference_root) if reference_root else REFERENCE_DIR
        self.gpu = None if gpu is DETECT else gpu
        self._detect = gpu is DETECT
        self.playback_seconds = playback_seconds  # per variant, for the H200 recordings
        self.kept = KeptRuns()  # the results on screen per lesson, this session's runs
        self._references: dict[str, dict[str, RunResult]] = {}
        self.class_follower = None  # a served workshop's class (classroom.install sets it)
        self._home = HomeScreen(self.course, self.progress, self.device_banner,
                                self.continue_target)

    # ---- lifecycle ---------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self._detect:
            self.detect_gpu()
        else:
            self.device_state = GPU if self.gpu is not None else NO_GPU
        self.push_screen(self._home)
        if self.progress.recovered:
            self.notify(self.progress.recovered, title="Progress recovered", severity="warning",
                        timeout=10)
        self._check_size()
        from .classroom import install  # a served workshop: the class, the test hook

        install(self)

    @work(thread=True, exit_on_error=False, group="device")
    def detect_gpu(self) -> None:
        from lab.measure.device import GpuInfo, gpu_info  # may import torch: off the UI thread
        from lab.runner.gpus import describe_first

        try:  # nvidia-smi first: no CUDA context (and no torch) in the app's own process
            seen = describe_first()
            info = GpuInfo(*seen) if seen else gpu_info()
        except Exception:
            info = None
        self.call_from_thread(self._set_gpu, info)
        prestart = getattr(self.runner, "prestart", None)
        if prestart is not None:  # warm workers import torch while the learner reads
            prestart()

    def _set_gpu(self, info) -> None:
        self.gpu = info
        self.device_state = GPU if info is not None else NO_GPU

    def on_resize(self, event) -> None:
        self._check_size(event.size)  # runs before App._on_resize stores the new size

    def _check_size(self, size=None) -> None:
        w, h = size or self.size
        small = w < MIN_SIZE[0] or h < MIN_SIZE[1]
        if small and not isinstance(self.screen, TooSmallScreen):
            self.push_screen(TooSmallScreen(MIN_SIZE))
        elif not small and isinstance(self.screen, TooSmallScreen):
            self.pop_screen()

    # ---- what the machine gives --------------------------------------------------------------
    def device_banner(self) -> Fit:
        """What this machine gives, in one line at 80 columns (a longer one where it fits)."""
        if self.device_state == DETECTING:
            return Fit(Text("Checking for a CUDA GPU…", style="dim"))
        if self.device_state == GPU:
            name = getattr(self.gpu, "name", "CUDA GPU")
            total = getattr(self.gpu, "total_bytes", 0)
            head = (("● ", "bold green"), (name, "bold"), f" · {capacity(total)}")
            return Fit(Text.assemble(*head, " · real CUDA runs; the lessons' GPU recordings "
                                     "beside them"), Text.assemble(*head, " · real CUDA runs"))
        head = (("○ ", "bold yellow"), ("No CUDA GPU", "bold"))
        refs = any(self.reference_root.glob("*/*.json")) if self.reference_root.is_dir() else False
        if not refs:
            return Fit(Text.assemble(*head, " · real CPU runs at small scale, simulation at full "
                                     "scale (no GPU recordings in this install yet)"),
                       Text.assemble(*head, " · sim (seed) and CPU (small) runs; no GPU "
                                     "recordings installed"))
        return Fit(Text.assemble(*head, " · each lesson's result is its run recorded on a GPU "
                                 "(the lesson names the card), played back; you can also run "
                                 "it yourself (simulated at full scale, real on the CPU at small "
                                 "scale)"),
                   Text.assemble(*head, " · r plays a lesson's GPU recording; y runs it "
                                 "yourself"))

    def machine(self) -> Machine:
        return Machine(None if self.device_state == DETECTING else self.device_state == GPU,
                       self.gpu)

    def choose_mode(self, requested: str, scale: str | None,
                    lesson_modes: tuple[str, ...]) -> ModeChoice:
        """The one mode rule (lab.measure.modes.choose), with what this machine has; raises a
        one-line ModeError when the mode cannot run here."""
        gpu = getattr(self.gpu, "name", True) if self.machine().has_gpu else None
        return choose(requested, scale, gpu=gpu, lesson_modes=lesson_modes)

    def resolve_mode(self, requested: str, scale: str, lesson: Lesson) -> str | None:
        """`auto` -> cuda with a GPU, else cpu (small) or sim (seed); None if impossible here."""
        try:
            return self.choose_mode(requested, scale, lesson.modes).mode
        except ModeError:
            return None

    def lesson_deps(self) -> LessonDeps:
        """What a lesson screen is given (it never reaches into the app for it)."""
        return LessonDeps(
            progress=self.progress, runner=self.runner, recordings=self.references,
            reference_root=self.reference_root, choose_mode=self.choose_mode,
            machine=self.machine, kept=self.kept, playback_seconds=self.playback_seconds,
            classroom=lambda: self.class_follower.room if self.class_follower else None,
            on_progress=self.refresh_home)

    def references(self, lesson_id: str) -> dict[str, RunResult]:
        """The H200 recordings of a lesson (the lesson screen decides where they go)."""
        if lesson_id not in self._references:
            self._references[lesson_id] = load_reference(lesson_id, self.reference_root)
        return self._references[lesson_id]

    # ---- routing -----------------------------------------------------------------------------
    def continue_target(self) -> Lesson | None:
        lessons = self.course.lessons
        if not lessons:
            return None
        last = self.progress.last_lesson
        for i, lesson in enumerate(lessons):
            if lesson.id == last:
                if self.progress.status(lesson.id) in (QUIZ_PASSED, QUIZ_DONE):
                    return next((l for l in lessons[i + 1:]  # the course's order, not folders'
                                 if self.progress.status(l.id) not in (QUIZ_PASSED, QUIZ_DONE)),
                                lesson)
                return lesson
        return next((l for l in lessons if self.progress.status(l.id) == NOT_STARTED), lessons[0])

    def open_lesson(self, lesson: Lesson) -> None:
        screen = LessonScreen(lesson, self.lesson_deps())
        if isinstance(self.screen, LessonScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def open_lesson_offset(self, lesson: Lesson, step: int) -> None:
        lessons = self.course.lessons
        i = next(i for i, l in enumerate(lessons) if l.id == lesson.id) + step
        if not 0 <= i < len(lessons):
            self.notify("That was the " + ("last" if step > 0 else "first") + " lesson.")
            return
        self.open_lesson(lessons[i])

    def refresh_home(self) -> None:
        if self._home.is_mounted:
            self._home.refresh_view()

    def _lesson_screen(self) -> LessonScreen | None:
        return self.screen if isinstance(self.screen, LessonScreen) else None

    # ---- actions -----------------------------------------------------------------------------
    def action_home(self) -> None:
        if isinstance(self.screen, LessonScreen):  # at most one lesson is ever open
            self.pop_screen()

    def action_continue(self) -> None:
        target = self.continue_target()
        if target is not None:
            self.open_lesson(target)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_playground(self) -> None:
        """Compare technique combinations on a workload of your own choosing."""
        from .screens.playground import PlaygroundScreen

        if not isinstance(self.screen, PlaygroundScreen):
            self.push_screen(PlaygroundScreen(runner=self.runner, choose_mode=self.choose_mode))

    def action_challenges(self) -> None:
        """The graded challenges (lab/course/challenges.py): start, edit, check in sim."""
        from .screens.challenges import ChallengeScreen

        if not isinstance(self.screen, ChallengeScreen):
            self.push_screen(ChallengeScreen())

    def action_open_snapshot(self) -> None:
        """Read a memory snapshot (torch.cuda.memory._dump_snapshot) or a result JSON."""
        if served():
            self.notify("Opening a file by its path is off in a lab served to a browser: it "
                        "would read files on the server.", severity="warning")
            return

        def chosen(path: str | None) -> None:
            from lab.serve.policy import Refused, allowed_path

            if path:
                try:
                    self.load_snapshot(str(allowed_path(path, "Open snapshot")))
                except Refused as e:
                    self.notify(str(e), title="Cannot open", severity="error")

        self.push_screen(PathPromptScreen("Memory snapshot or result JSON to open:",
                                          "e.g. snapshot.pickle"), chosen)

    @work(thread=True, exclusive=True, group="snapshot", exit_on_error=False)
    def load_snapshot(self, path: str) -> None:
        # unpickling a large snapshot takes seconds: never on the UI thread
        from lab.snapshots import SnapshotError, open_summary

        try:
            summary = open_summary(path)[0]
        except SnapshotError as e:
            self.call_from_thread(self.notify, str(e), title="Cannot open", severity="error")
            return
        except OSError as e:
            self.call_from_thread(self.notify, f"{path}: {e.strerror}", title="Cannot open",
                                  severity="error")
            return
        from .screens.snapshot_view import SnapshotViewScreen

        self.call_from_thread(self.push_screen, SnapshotViewScreen(summary))

    def action_calibration(self) -> None:
        """How close your predictions were, lesson by lesson."""
        if not isinstance(self.screen, CalibrationScreen):
            self.push_screen(CalibrationScreen(self.course, self.progress))

    def action_save_svg(self) -> None:
        """Export what is on screen (e.g. the results) as an SVG, into the lab's screenshots
        folder in your user data folder (not wherever the app was started), and say where."""
        if served():  # to the browser, as a download: nothing is written on the server
            self.deliver_screenshot()
            return
        folder = screenshots_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(path=str(folder))
        except OSError as e:
            self.notify(f"could not save a screenshot in {folder}: {e.strerror}",
                        title="Screenshot", severity="error")
            return
        self.notify(f"saved {path}", title="Screenshot")

    def action_reset_progress(self) -> None:
        def done(yes: bool | None) -> None:
            if yes:
                self.progress.reset()
                self.kept.clear()
                self.refresh_home()
                self.notify("Progress and run history reset.")

        self.push_screen(ConfirmScreen("Reset all progress, quiz answers and run history?"), done)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        lesson = screen if isinstance(screen, LessonScreen) else None
        if lesson is not None:
            yield SystemCommand("Run experiment", "Run every checked variant, or play the GPU "
                                "recording without a GPU (r)", lesson.action_run)
            yield SystemCommand("Run it yourself", "Run on this machine (y)",
                                lesson.action_run_yourself)
            yield SystemCommand("Cancel run", "Stop the running variant (Esc)",
                                lesson.action_cancel_or_back)
            yield SystemCommand("Next lesson", "Open the next lesson (n)",
                                lambda: lesson.action_goto(1))
            yield SystemCommand("Previous lesson", "Open the previous lesson (p)",
                                lambda: lesson.action_goto(-1))
            for tab in ("text", "experiment", "results", "inspector", "quiz"):
                yield SystemCommand(f"Show {tab}", f"Switch to the {tab} tab",
                                    lambda tab=tab: lesson.action_tab(tab))
        yield SystemCommand("Course map", "Back to the list of lessons", self.action_home)
        yield SystemCommand("Continue", "Open the lesson where you left off", self.action_continue)
        yield SystemCommand("Playground", "Compare technique combinations on a workload (g)",
                            self.action_playground)
        yield SystemCommand("Open snapshot", "View a memory snapshot or result JSON (o)",
                            self.action_open_snapshot)
        yield SystemCommand("Diff two runs", "Where the peak moved between two results or "
                            "snapshots (memlab diff)", lambda: open_diff(self))
        yield SystemCommand("Challenges", "Graded exercises: edit the code, sim checks it (x)",
                            self.action_challenges)
        yield SystemCommand("Calibration", "How close your predictions were, lesson by lesson",
                            self.action_calibration)
        yield SystemCommand("Help", "Keys and how to read the plots (?)", self.action_help)
        yield SystemCommand("Reset progress", "Forget progress and run history (asks first)",
                            self.action_reset_progress)
        yield from super().get_system_commands(screen)


def screenshots_dir() -> Path:
    """Where Ctrl+S saves: `<user data folder>/screenshots` (MEMLAB_HOME overrides the folder)."""
    return data_dir() / "screenshots"


def run_app(runner: Any = None) -> None:
    """`memlab` with no subcommand: open the lab. On quit, the runner service this app started
    stops with it, unless another app or a run still uses it: then one line says it stays, and
    for how long (lab.runner.remote.ServiceRunner.release)."""
    app = MemLabApp(runner=runner)
    register = getattr(app.runner, "register", None)
    if register is not None:
        register()
    try:
        app.run()
    finally:
        release = getattr(app.runner, "release", None)
        note = release() if release is not None else None
        if note:
            print(note, file=sys.stderr)
