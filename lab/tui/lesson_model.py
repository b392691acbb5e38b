"""`LessonRun`: what a lesson screen shows about running, as one immutable state.

The lesson screen used to keep a dozen mutable attributes (running, plan, cancel, live, finished,
last, restored, …): an implicit state machine. Here it is explicit. The screen turns what happens
(the learner starts a run, the runner streams an event, a variant ends, the run ends, Esc) into
events and folds them into the state, then renders the state; memray's TUI keeps its reactive
snapshot the same way. `fold` is pure: its behaviours are unit tests without a Pilot.

    state = LessonRun.empty(variant names)
    state = fold(state, Begin(plan))
    state = fold(state, Streamed("baseline", 0, 2, {"type": "sample", ...}))
    state = fold(state, VariantDone(result, 0, 2))
    state = fold(state, Finished(plan, results, cancelled=False, recording=recordings))
    state = fold(state, Settings("cpu", "small", resolved="cpu"))  # the controls changed

The words the screen shows for a state are lab/tui/lesson_words.py's; what r and y do (the plan,
the requests, the GPU's capacity) lab/tui/lesson_plans.py's.

Which results lead after a run (the Results tab opens on them) follows what the learner just did:
the recording played back leads after `r` (the learner's own run, if any, beside it); the
learner's own run leads after `y` or a GPU run (the recording beside it, the difference first).

Headless: no Textual, no Rich, no torch (lab.tui's headless modules, tests/unit).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from lab.measure.result import RunResult

from .provenance import CLASS, LIVE, RECORDING
from .result_set import ResultSet

IDLE, RUNNING, CANCELLING = "idle", "running", "cancelling"
SPARK_POINTS = 96  # the status line's sparkline shows the last 48



@dataclass(frozen=True)
class RunPlan:
    """What the learner asked for: the selected variants (in the order they run), one mode,
    one scale."""

    variants: tuple[str, ...]
    mode: str  # resolved: cuda | cpu | sim
    scale: str
    gpu_memory: int | None = None
    requested_mode: str = "auto"
    recorded: bool = False  # a recording played back, not a run on this machine
    card: str = ""  # a playback: the card it was recorded on ("H200", "H100": lab.report.card_name)
    how: str = ""  # provenance of the results when not "recording"/"live": "class" (a workshop)

    @property
    def origin(self) -> str:
        return self.how or (RECORDING if self.recorded else LIVE)


@dataclass(frozen=True)
class Live:
    """The running variant's timeline so far: x = allocation event, y = live bytes."""

    x: tuple[int, ...] = ()
    y: tuple[int, ...] = ()
    phases: tuple[tuple[str, int], ...] = ()  # (phase, event it starts at)
    pending: tuple[str, ...] = ()  # phases announced, waiting for the next sample's event count


@dataclass(frozen=True)
class Outcome:
    """What the last run did: the status line says it until the next run starts."""

    plan: RunPlan
    results: tuple[RunResult, ...]
    cancelled: bool
    beside_recording: bool  # the learner's run now sits beside the lesson's recording


@dataclass(frozen=True)
class LessonRun:
    variants: tuple[str, ...]  # the lesson's variants, in the lesson's order
    lead: ResultSet = field(default_factory=ResultSet)  # the Results tab opens on these
    beside: ResultSet = field(default_factory=ResultSet)
    restored: str | None = None  # "from your last session (date)"
    stage: str = IDLE
    plan: RunPlan | None = None
    finished: tuple[RunResult, ...] = ()  # this run's variants done so far
    live: tuple[tuple[str, Live], ...] = ()  # variant -> its timeline so far, while it runs
    current: str | None = None  # the variant the status line follows (the first one running)
    position: int = 0
    running_now: tuple[tuple[int, str], ...] = ()  # (position, variant) of every one in flight
    total: int = 0
    phase: str | None = None  # the running variant's phase and live bytes
    live_bytes: int | None = None
    spark: tuple[float, ...] = ()
    service: str = ""  # the runner service's last word ("waiting for GPU 0 — 2 ahead")
    waiting: bool = False
    completed: int = 0  # runs finished on this screen (tests wait on it)
    outcome: Outcome | None = None
    class_run_shown: bool = False  # a workshop: the instructor's run was played once
    # what the controls ask for (the status line says what y would run, at once)
    mode: str = "auto"  # as requested: auto | cuda | cpu | sim
    scale: str = "seed"
    resolved: str | None = None  # what `mode` runs as on this machine (None: it cannot)
    main_recording: bool = False  # no CUDA here and the lesson was recorded: r plays it
    card: str = ""  # the card the lesson was recorded on, read from its recordings ("H200")

    @classmethod
    def empty(cls, variants: Iterable[str]) -> LessonRun:
        return cls(tuple(variants))

    @property
    def running(self) -> bool:
        return self.stage != IDLE

    @property
    def cancelling(self) -> bool:
        return self.stage == CANCELLING

    def live_of(self, variant: str) -> Live | None:
        return dict(self.live).get(variant)

    @property
    def mine(self) -> ResultSet:
        """The learner's own run on screen (lead or beside), if any."""
        return next((rs for rs in (self.lead, self.beside) if rs and rs.how == LIVE), ResultSet())

    @property
    def recording(self) -> ResultSet:
        return next((rs for rs in (self.lead, self.beside) if rs and rs.how == RECORDING),
                    ResultSet())


# ---- events ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Restored:
    """Results shown in an earlier session (or earlier in this one) come back on screen."""

    lead: ResultSet
    beside: ResultSet
    label: str | None = None


@dataclass(frozen=True)
class Settings:
    """The controls changed (mode, scale) or the machine became known: what y would run."""

    mode: str
    scale: str
    resolved: str | None
    main_recording: bool | None = None  # None: unchanged
    card: str | None = None  # the card the lesson's recordings ran on; None: unchanged


@dataclass(frozen=True)
class Begin:
    plan: RunPlan


@dataclass(frozen=True)
class Streamed:
    """One worker event (queued, started, status, phase, sample, …) for variant `position`."""

    variant: str
    position: int
    total: int
    event: Any  # the event's dict, read only


@dataclass(frozen=True)
class VariantDone:
    result: RunResult
    position: int
    total: int


@dataclass(frozen=True)
class CancelAsked:
    pass


@dataclass(frozen=True)
class Finished:
    plan: RunPlan
    results: tuple[RunResult, ...]
    cancelled: bool
    recording: ResultSet = field(default_factory=ResultSet)  # the lesson's GPU recordings


def fold(state: LessonRun, ev: Any) -> LessonRun:
    """The state after `ev`. Pure: the screen renders what comes back."""
    if isinstance(ev, Restored):
        return replace(state, lead=ev.lead.in_order(state.variants),
                       beside=ev.beside.in_order(state.variants), restored=ev.label)
    if isinstance(ev, Settings):
        main = state.main_recording if ev.main_recording is None else ev.main_recording
        card = state.card if ev.card is None else ev.card
        return replace(state, mode=ev.mode, scale=ev.scale, resolved=ev.resolved,
                       main_recording=main, card=card)
    if isinstance(ev, Begin):
        return replace(state, stage=RUNNING, plan=ev.plan, finished=(), live=(), current=None,
                       position=0, running_now=(), total=len(ev.plan.variants), phase=None,
                       live_bytes=None,
                       spark=(), service="", waiting=False, outcome=None,
                       class_run_shown=state.class_run_shown or ev.plan.how == CLASS)
    if not state.running:
        return state  # a late event of a run already over
    if isinstance(ev, CancelAsked):
        return replace(state, stage=CANCELLING)
    if isinstance(ev, Streamed):
        return _streamed(state, ev)
    if isinstance(ev, VariantDone):
        live = tuple((k, v) for k, v in state.live if k != ev.result.variant)
        running = tuple(r for r in state.running_now if r[1] != ev.result.variant)
        return _follow(replace(state, finished=state.finished + (ev.result,), live=live,
                               running_now=running))
    if isinstance(ev, Finished):
        return _finished(state, ev)
    raise TypeError(f"not a lesson-run event: {ev!r}")


def _follow(state: LessonRun) -> LessonRun:
    """The status line follows the first variant in flight (the one the learner looks at runs
    first); when that one ends it moves on, with nothing of the last one's phase or bytes."""
    if not state.running_now or state.running_now[0][1] == state.current:
        return state
    position, name = state.running_now[0]
    return replace(state, current=name, position=position, phase=None, live_bytes=None,
                   spark=(), service="", waiting=False)


def _streamed(state: LessonRun, ev: Streamed) -> LessonRun:
    e, kind, name = ev.event, ev.event.get("type"), ev.variant
    if kind == "queued" and (ev.position, name) not in state.running_now:
        state = _follow(replace(state, running_now=tuple(sorted(
            state.running_now + ((ev.position, name),)))))
    followed = name == state.current or state.current is None
    changes: dict[str, Any] = {"total": ev.total}
    if followed:
        changes.update(current=name, position=ev.position)
    live = dict(state.live)
    lv = live.get(name, Live())
    if kind == "queued" and followed:  # a new variant: its own phase, bytes and sparkline
        changes.update(phase=None, live_bytes=None, spark=(), service="", waiting=False)
    if kind == "status" and e.get("text") and followed:
        changes.update(service=str(e["text"]), waiting=e.get("stage") == "waiting")
    if kind == "phase":  # it starts at the next sample's event count (phases carry none)
        lv = replace(lv, pending=lv.pending + (str(e.get("name") or ""),))
    if kind == "sample" and e.get("events") is not None:
        at = max(int(e["events"]), lv.x[-1] if lv.x else 0)
        lv = Live(lv.x + (at,), lv.y + (int(e.get("live_bytes") or 0),),
                  lv.phases + tuple((p, at) for p in lv.pending), ())
    if kind in ("phase", "sample") and followed:
        if not state.waiting:  # "worker ready" and the like said what a running phase says now
            changes["service"] = ""
        changes["phase"] = e.get("phase") or e.get("name")
        changes["live_bytes"] = e.get("live_bytes")
        if e.get("live_bytes") is not None:
            spark = changes.get("spark", state.spark) + (float(e["live_bytes"]),)
            changes["spark"] = spark[-SPARK_POINTS:]
    live[name] = lv
    return replace(state, live=tuple(live.items()), **changes)


def _finished(state: LessonRun, ev: Finished) -> LessonRun:
    plan = ev.plan
    lead, beside = state.lead, state.beside
    beside_recording = False
    if ev.results:
        new = ResultSet(ev.results, plan.origin).in_order(state.variants)
        if plan.recorded:  # r: the recording (or the instructor's run) leads; yours beside it
            lead, beside = new, state.mine
        else:  # y, or a GPU's run: your run leads, the GPU's recording beside it
            recording = ev.recording.in_order(state.variants)
            lead, beside = new, recording
            beside_recording = bool(recording)
    return replace(state, stage=IDLE, lead=lead, beside=beside,
                   restored=None if ev.results else state.restored, live=(), current=None,
                   completed=state.completed + 1,
                   outcome=Outcome(plan, tuple(ev.results), ev.cancelled, beside_recording))


# ---- what the learner chose ------------------------------------------------------------------
def run_order(selected: Iterable[str], first: str | None) -> tuple[str, ...]:
    """The selected variants, the one the learner is looking at first (its result is on screen
    soonest), then the others in the lesson's order."""
    chosen = tuple(selected)
    if first in chosen:
        return (first,) + tuple(v for v in chosen if v != first)
    return chosen


__all__ = ["Begin", "CANCELLING", "CancelAsked", "Finished", "IDLE", "LessonRun", "Live",
           "Outcome", "RUNNING", "Restored", "RunPlan", "Settings", "Streamed", "VariantDone",
           "fold", "run_order"]
