"""What r and y do on a lesson screen, decided without a screen: which variants a playback or a
run of yours takes (and what to tell the learner about the others), the requests the runner
gets, the GPU capacity a live plot draws, what the quiz and the prediction compare with.

r plays the lesson's GPU recording where there is no CUDA GPU and the lesson was recorded (its
playback is the main result; the card it ran on is read from the recording), a served
workshop's pushed run first; otherwise r, like y, runs the checked variants on this machine.
The variant the learner looks at runs first.

Headless: no Textual, no Rich, no torch (tests/unit/test_lesson_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.course.curriculum import Lesson
from lab.measure.modes import ModeError, mode_info
from lab.runner.protocol import RunRequest
from lab.report import card_name, recorded_on
from lab.report.units import capacity

from .lesson_model import LessonRun, RunPlan
from .provenance import CLASS, RECORDING
from .result_set import ResultSet


@dataclass(frozen=True)
class Choice:
    """The variants a run takes, and what to say about the selected ones it leaves out."""

    variants: tuple[str, ...]
    notices: tuple[tuple[str, str], ...] = ()  # (message, severity)


def predict_question(lesson: Lesson):
    """The lesson's predict-the-peak question, if it has one."""
    return next((q for q in lesson.quiz if q.kind == "predict_peak"), None)


def resolved_mode(choose_mode, requested: str, scale: str, lesson: Lesson) -> str | None:
    """What `requested` runs as here (auto: cuda, cpu or sim), or None where it cannot run."""
    try:
        return choose_mode(requested, scale, lesson.modes).mode
    except ModeError:
        return None


def recording_set(lesson: Lesson, recordings: dict) -> ResultSet:
    """The lesson's GPU recordings, as the set a run of yours sits beside."""
    return ResultSet([recordings[v] for v in recorded_variants(lesson, recordings)], RECORDING)


def recorded_variants(lesson: Lesson, recordings: dict) -> list[str]:
    return [v.name for v in lesson.variants if v.name in recordings]


def main_is_recording(has_gpu: bool | None, lesson: Lesson, recordings: dict) -> bool:
    """No CUDA here, and a GPU recorded this lesson: its playback is the main result."""
    return not has_gpu and bool(recorded_variants(lesson, recordings))


def recorded_card(lesson: Lesson, recordings: dict) -> str:
    """The card this lesson's recordings ran on ("H200", "H100"), read from them; "" if none."""
    ran = [recordings[v] for v in recorded_variants(lesson, recordings)]
    return recorded_on(ran) if ran else ""


def playback_choice(lesson: Lesson, selected: tuple[str, ...], recordings: dict) -> Choice:
    """The selected variants the GPU recorded; the others are named (y runs them)."""
    recorded = recorded_variants(lesson, recordings)
    card = recorded_card(lesson, recordings) or "GPU"
    missing = [v for v in selected if v not in recorded and lesson.variant(v).recorded]
    simulated = [v for v in selected if not lesson.variant(v).recorded]
    notices = []
    if missing:
        notices.append((f"No {card} recording of {', '.join(missing)}: y runs it yourself.",
                        "warning"))
    if simulated:
        notices.append((f"{', '.join(simulated)}: simulated, not recorded on the {card} (y runs "
                        "it in sim).", "information"))
    return Choice(tuple(v for v in selected if v in recorded), tuple(notices))


def live_choice(lesson: Lesson, selected: tuple[str, ...], mode: str) -> Choice:
    """The selected variants that run in `mode` (some run in sim only: not recorded)."""
    skipped = [v for v in selected if not lesson.variant(v).runs_in(mode)]
    notices = ((("; ".join(lesson.variant(v).not_run_in(mode) for v in skipped) + ".",
                 "warning"),) if skipped else ())
    return Choice(tuple(v for v in selected if v not in skipped), notices)


def playback_plan(variants: tuple[str, ...], first, how: str = "") -> RunPlan:
    """A playback (the GPU's recording, or the instructor's run: `how`), as it was recorded."""
    return RunPlan(variants, first.mode, first.scale, None, "class" if how else "recording",
                   recorded=True, how=how, card=card_name(first.device.name))


def requests(plan: RunPlan, lesson: Lesson, jobs: int) -> list[RunRequest]:
    """One request per variant, in the plan's order; side by side (`jobs` > 1) the first (the
    one the learner looks at) keeps the CPU first."""
    return [RunRequest.for_lesson(lesson, variant, plan.mode, plan.scale,
                                  gpu_memory=plan.gpu_memory, background=jobs > 1 and i > 0)
            for i, variant in enumerate(plan.variants)]


def live_capacity(plan: RunPlan | None, lesson: Lesson, recordings: dict,
                  gpu=None) -> tuple[int, str] | None:
    """The GPU size a run's growing plot draws: the recording's virtual cap, the one asked for,
    the lesson's own, or (a run on your GPU) its total; said once in GB and GiB."""
    if plan is None:
        return None
    if plan.recorded:
        cap = next((r.device.virtual_bytes for r in recordings.values()
                    if r.device.virtual_bytes), None)
    else:
        cap = plan.gpu_memory or lesson.scales.get(plan.scale, {}).get("gpu_memory")
    if cap:
        return int(cap), f"GPU capped at {capacity(int(cap))}"
    total = getattr(gpu, "total_bytes", None)
    if not plan.recorded and mode_info(plan.mode).on_gpu and total:
        return int(total), f"{getattr(gpu, 'name', 'GPU')} capacity {capacity(int(total))}"
    return None


def class_run_label(state: LessonRun) -> str | None:
    """"run by your instructor on …" while the instructor's run is the result on screen."""
    lead = state.lead
    return lead.source.long if lead and lead.how == CLASS else None


def needs_prediction(question, lp) -> bool:
    """A predict-the-peak question not answered before any result was on screen."""
    return question is not None and not (lp and (lp.prediction_gb is not None or lp.revealed_at))


def prediction_truth(state: LessonRun, question) -> tuple[float | None, str]:
    """(the peak in GB, where it came from) the prediction is graded against: the predicted
    variant at the question's scale, run ok, the lead set first."""
    for rs in (state.lead, state.beside):
        r = rs.get(question.variant) if (question and rs) else None
        if r is not None and r.ok and r.scale == question.scale:
            return r.peak.bytes / 1e9, rs.source.short
    return None, ""


def measured_peaks(state: LessonRun) -> dict[tuple[str, str], tuple[int, str]]:
    """(variant, scale) -> (peak bytes, source) of every ok result on screen, the lead's first."""
    measured = {}
    for rs in (state.beside, state.lead):  # the lead wins
        for r in rs.results:
            if r.ok:
                measured[(r.variant, r.scale)] = (r.peak.bytes, rs.source.short)
    return measured


def recorded_snapshot(root: Path | str, lesson_id: str, variant: str) -> Path | None:
    """The recorded allocator snapshot of `variant`, else of any variant of the lesson."""
    folder = Path(root) / lesson_id
    path = folder / f"{variant}.profile.pkl.gz"
    if path.is_file():
        return path
    found = sorted(folder.glob("*.profile.pkl.gz")) if folder.is_dir() else []
    return found[0] if found else None


__all__ = ["Choice", "class_run_label", "live_capacity", "live_choice", "main_is_recording",
           "measured_peaks", "needs_prediction", "playback_choice", "playback_plan",
           "predict_question", "prediction_truth", "recorded_card", "recorded_snapshot",
           "recorded_variants",
           "recording_set", "requests", "resolved_mode"]
