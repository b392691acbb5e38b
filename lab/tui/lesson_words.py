"""What the lesson screen says about a `LessonRun` state, in words: the status line (idle, while
running, after a run), the Results tab's heading during a run, the prediction line, the hint on
an empty Results tab.

Each is `Words`: (text, style) pieces the screen turns into Rich Text ("variant": the running
variant's colour). A line that must fit comes as several forms, the longest first: the status
line shows the first that fits its width (lab/tui/widgets/fit.py `Fit`), and the last is short
enough for 80 columns, so nothing a learner needs is cut off its end. Numbers are lab.report's.

Headless: no Textual, no Rich, no torch (tests/unit/test_lesson_model.py).
"""

from __future__ import annotations

from typing import Iterable

from lab.measure.result import RunResult
from lab.report import format_bytes
from lab.report.provenance import with_article
from lab.report.rows import STATUS_LABEL
from lab.report.units import given_gb

from .lesson_model import LessonRun, Outcome, RunPlan
from .provenance import CLASS

Words = tuple[tuple[str, str], ...]  # (text, style) pieces; the screen makes them Rich Text


def recording(card: str) -> str:
    """"H200 recording": a recording named by the card it ran on (lab.report.card_name)."""
    return f"{card} recording" if card else "GPU recording"


def on_card(card: str) -> str:
    """"an H100", "an H200/H100"; "a GPU" when the recordings do not say."""
    return with_article(card) if card else "a GPU"


def live_heading(plan: RunPlan) -> str:
    if plan.how == CLASS:
        return "▶ Playing back your instructor's run…"
    if plan.recorded:
        return (f"▶ Playing back the {recording(plan.card)} (recorded on {on_card(plan.card)}, "
                "not run on this machine)…")
    return f"▶ Running on this machine: {plan.mode}, {plan.scale} scale…"


def progress_forms(state: LessonRun) -> tuple[Words, ...]:
    """The status line during a run, the longest first: at 80 columns, with two variants side
    by side, the phase and the live bytes stay and the labels, the counts and the key hint go."""
    plan = state.plan
    if plan is None or state.current is None:
        return ((("Starting…", "bold"),),)
    verb = ("▶ instructor's run: " if plan.how == CLASS else
            f"▶ {recording(plan.card)}: " if plan.recorded else "▶ ")
    head: Words = ((verb, "bold"), (state.current, "variant"))
    others = [name for _, name in state.running_now if name != state.current]
    if others:  # side by side (sim: one per core)
        where = f" ({len(state.finished)}/{state.total} done, +{len(others)} beside it)"
        short_where = f" ({len(state.finished)}/{state.total}, +{len(others)})"
    else:
        where = short_where = f" ({state.position + 1}/{state.total})"
    news: Words = ()
    if state.phase is None and state.live_bytes is None and not state.service:
        news = ((" · loading…" if plan.recorded else " · starting worker…", "dim"),)
    if state.service:
        news += ((f" · {state.service}", "bold yellow" if state.waiting else "dim"),)

    def now(labelled: bool) -> Words:  # the phase and the live bytes
        words: Words = ()
        if state.phase:
            words += ((" · phase " if labelled else " · ", "dim"), (str(state.phase), "bold"))
        if state.live_bytes is not None:
            words += ((" · live " if labelled else " · ", "dim"),
                      (format_bytes(state.live_bytes), "bold"))
        return words

    cancel = ("  cancelling…" if state.cancelling else "  Esc cancels", "dim")
    short_cancel: Words = ((" · cancelling…", "dim"),) if state.cancelling else ()
    bare: Words = (("▶ ", "bold"), (state.current, "variant"))  # the variant, nothing else
    live: Words = ((" · ", "dim"), (format_bytes(state.live_bytes), "bold")) \
        if state.live_bytes is not None else ()
    return (
        (*head, (where, ""), *news, *now(True), cancel),
        (*head, (where, ""), *news, *now(True), *short_cancel),
        (*head, (short_where, ""), *news, *now(False), *short_cancel),
        (*head, *news, *now(False), *short_cancel),
        (*bare, *now(False), *short_cancel),
        (*bare, *live, *short_cancel),  # a long variant name: the bytes, still moving
    )


def counts(results: Iterable[RunResult], names: bool = True) -> str:
    """'3 ok', '9 ok, 2 OOM (fit_16gib_start, fit_16gib_tp)'; without `names` '9 ok, 2 OOM'."""
    results = list(results)
    if not results:
        return "nothing ran"
    ok = [r for r in results if r.ok]
    by_status: dict[str, list[str]] = {}
    for r in results:
        if not r.ok:
            by_status.setdefault(STATUS_LABEL.get(r.status, r.status), []).append(r.variant)
    parts = [f"{len(ok)} ok"] if ok else []
    parts += [f"{len(vs)} {label}" + (f" ({', '.join(vs)})" if names else "")
              for label, vs in by_status.items()]
    return ", ".join(parts)


def outcome_words(outcome: Outcome, main_is_recording: bool, card: str = "") -> tuple[Words, ...]:
    """After a run: what just happened, in one line, and what to do next; the longest first.
    The shortest says the counts without the variants' names, so it fits 80 columns whatever
    the lesson calls its variants (the Results tab names them). `card`: the lesson's recordings'."""
    plan = outcome.plan
    if outcome.cancelled:
        head, short = "■ Cancelled", "■ Cancelled"
    elif plan.how == CLASS:
        head, short = "▶ Played back your instructor's run", "▶ Instructor's run"
    elif plan.recorded:
        head = f"▶ Played back the {recording(plan.card)}"
        short = f"▶ {recording(plan.card)}"
    else:
        done = all(r.ok for r in outcome.results)
        head = "✔ Your run is done" if done else "Your run ended"
        short = "✔ Done" if done else "Ended"
    where = "" if plan.recorded else f" ({plan.mode}, {plan.scale} scale)"
    first = ((head, "bold"), (f"{where}: {counts(outcome.results)}", ""))
    bare = ((head, "bold"), (f"{where}: {counts(outcome.results, names=False)}", ""))
    shortest = ((short, "bold"), (f": {counts(outcome.results, names=False)}", ""))
    then: Words = ()
    if outcome.beside_recording:
        then = ((f" · beside the {recording(card)}", "dim"),)
    elif plan.recorded and main_is_recording:
        then = ((" · y runs it yourself", "dim"),)
    tail = ((" · Results below; 4 inspects the peak", "dim"),)
    return (first + then + tail, first + then, bare + then, bare, shortest)


def idle_words(state: LessonRun) -> tuple[Words, ...]:
    """Before a run (and after the controls change): what r and y do here, the longest first.
    y's mode and scale are the controls' as they are now."""
    if state.main_recording:
        mode = state.resolved or f"{state.mode}: not here"
        yours = f"y runs it yourself ({mode}, {state.scale})"
        rec = recording(state.card)
        return ((("Ready. ", "bold"), (f"r plays the {rec} · {yours} · ? help", "dim")),
                (("Ready. ", "bold"), (f"r plays the {rec} · {yours}", "dim")),
                ((f"r: {rec} · ", "dim"), (f"y: {mode}, {state.scale}", "dim")))
    mode = state.resolved or state.mode
    return ((("Ready. ", "bold"), (f"r runs every checked variant ({mode}, {state.scale}) · "
                                   "Esc cancels · ? help", "dim")),
            (("Ready. ", "bold"), (f"r runs every checked variant ({mode}, {state.scale})",
                                   "dim")),
            (("r runs: ", "dim"), (f"{mode}, {state.scale}", "dim")))


def prediction_words(question, lp) -> Words | None:
    """The line under the controls: the committed prediction, or that r asks for one."""
    if question is None:
        return None
    if lp is not None and lp.prediction_gb is not None:
        return (("your prediction: ", "dim"), (given_gb(lp.prediction_gb), "bold"),
                (f" for the {question.variant} peak ({question.scale} scale), committed", "dim"))
    if lp is not None and lp.revealed_at:
        return (("no prediction made before the result was shown", "dim"),)
    return ((f"r asks you to predict the {question.variant} peak ({question.scale} scale) first",
             "dim"),)


def variant_notice(result: RunResult) -> tuple[str, str, str] | None:
    """(message, title, severity) when a variant of a run of yours failed or ran out of memory."""
    if result.status == "error":
        return f"{result.variant}: {result.error}", "Run failed", "error"
    if result.status == "oom":
        return f"{result.variant} ran out of memory — see Results.", "Out of memory", "warning"
    return None


def quiz_notice(score: tuple[int, int] | None) -> str | None:
    """When the quiz is all answered: the score."""
    if score is None:
        return None
    right, total = score
    return f"Quiz done: {right}/{total} correct" + (" ✔" if right == total else "")


def empty_hint(main_is_recording: bool, card: str = "") -> Words:
    """The Results tab before any result; `card`: the one the lesson was recorded on."""
    if main_is_recording:
        return (("No result yet. ", "dim"), ("r", "bold"),
                (f" plays this lesson as recorded on {on_card(card)} (you have no CUDA GPU here: "
                 "the recording is the real thing); ", "dim"), ("y", "bold"),
                (" runs it yourself on this machine (simulated at full size, or for real on the "
                 "CPU at small scale). Predict first: r asks.", "dim"))
    return (("No results yet. Press ", "dim"), ("r", "bold"),
            (" to run every checked variant; results appear here as they arrive.", "dim"))


__all__ = ["Words", "counts", "empty_hint", "idle_words", "live_heading", "outcome_words",
           "prediction_words", "progress_forms", "quiz_notice", "recording", "variant_notice"]
