"""The lesson screen's headless model (lab/tui/lesson_model.py): runner events folded into one
immutable state, and the words the screen shows for it. No Textual, no Pilot: the behaviours of
issue 25 as plain functions (what leads after r and after y, the run order, what the status line
says, the version line)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from lab.measure.result import DeviceInfo, Peak, RunResult
from lab.tui.lesson_model import (Begin, CancelAsked, Finished, LessonRun, Restored, RunPlan,
                                  Settings, Streamed, VariantDone, fold, run_order)
from lab.tui.lesson_words import idle_words, outcome_words, progress_forms
from lab.measure.result import CodePaths
from lab.tui.provenance import LIVE, RECORDING, code_path_line
from lab.tui.result_set import ResultSet

VARIANTS = ("baseline", "bf16", "ckpt")


def result(variant: str, mode: str = "sim", status: str = "ok", peak: int = 10**9,
           **kw) -> RunResult:
    device = DeviceInfo("NVIDIA H200", "cuda") if mode == "cuda" else DeviceInfo(mode, mode)
    return RunResult(lesson="l", variant=variant, mode=mode, scale="seed", device=device,
                     status=status, peak=Peak(bytes=peak), **kw)


RECORDED = ResultSet([result(v, "cuda") for v in VARIANTS], RECORDING)
PLAYBACK = RunPlan(VARIANTS, "cuda", "seed", recorded=True, card="H200")


def run(state: LessonRun, plan: RunPlan, results, recording=RECORDED, cancelled=False):
    state = fold(state, Begin(plan))
    for i, r in enumerate(results):
        state = fold(state, Streamed(r.variant, i, len(results), {"type": "queued"}))
        state = fold(state, VariantDone(r, i, len(results)))
    return fold(state, Finished(plan, tuple(results), cancelled, recording))


def test_the_state_is_immutable_and_starts_idle():
    state = LessonRun.empty(VARIANTS)
    assert not state.running and not state.lead and state.completed == 0
    with pytest.raises(FrozenInstanceError):
        state.stage = "running"  # type: ignore[misc]


def test_after_r_the_recording_leads_and_after_y_the_learners_run_leads_beside_it():
    state = run(LessonRun.empty(VARIANTS), PLAYBACK, RECORDED.results)
    assert state.lead.how == RECORDING and not state.beside
    assert not state.outcome.beside_recording and state.completed == 1
    # y: the selected variant ran first, the results are shown in the lesson's order
    mine_plan = RunPlan(run_order(VARIANTS, "ckpt"), "sim", "seed")
    assert mine_plan.variants == ("ckpt", "baseline", "bf16")
    state = run(state, mine_plan, [result("ckpt"), result("baseline"), result("bf16")])
    assert state.lead.how == LIVE and [r.variant for r in state.lead.results] == list(VARIANTS)
    assert state.beside.how == RECORDING and state.outcome.beside_recording
    assert state.mine is state.lead and state.recording is state.beside
    # r again: the recording leads, the learner's run stays beside it
    state = run(state, PLAYBACK, RECORDED.results)
    assert state.lead.how == RECORDING and state.beside.how == LIVE
    assert state.completed == 3


def test_streamed_events_build_the_live_timeline_and_the_status_line():
    state = fold(LessonRun.empty(VARIANTS), Begin(RunPlan(("baseline",), "sim", "seed")))
    assert state.running and progress_forms(state)[0] == (("Starting…", "bold"),)
    for ev in ({"type": "queued"},
               {"type": "status", "stage": "waiting", "text": "waiting for GPU 0 — 2 ahead"},
               {"type": "phase", "name": "model"},
               {"type": "sample", "events": 4, "live_bytes": 100, "phase": "model"},
               {"type": "phase", "name": "forward 0"},
               {"type": "sample", "events": 9, "live_bytes": 300, "phase": "forward 0"}):
        state = fold(state, Streamed("baseline", 0, 1, ev))
    live = state.live_of("baseline")
    # a phase starts at the next sample's event count (phases carry none)
    assert live.x == (4, 9) and live.y == (100, 300)
    assert live.phases == (("model", 4), ("forward 0", 9))
    assert state.spark == (100.0, 300.0) and state.phase == "forward 0"
    words = "".join(t for t, _ in progress_forms(state)[0])
    assert words.startswith("▶ baseline (1/1)") and "waiting for GPU 0 — 2 ahead" in words
    assert "phase forward 0" in words and "live 300 B" in words and "Esc cancels" in words
    assert ("baseline", "variant") in progress_forms(state)[0]  # drawn in its colour


def test_cancel_says_so_and_late_events_change_nothing():
    plan = RunPlan(("baseline", "bf16"), "sim", "seed")
    state = fold(fold(LessonRun.empty(VARIANTS), Begin(plan)), CancelAsked())
    assert state.cancelling
    assert "cancelling…" in "".join(t for t, _ in progress_forms(
        fold(state, Streamed("baseline", 0, 2, {"type": "queued"})))[0])
    state = fold(state, Finished(plan, (result("baseline", status="cancelled"),), True, RECORDED))
    assert not state.running
    assert outcome_words(state.outcome, True)[0][0] == ("■ Cancelled", "bold")
    after = fold(state, Streamed("bf16", 1, 2, {"type": "sample", "events": 1}))
    assert after is state  # a late event of a run already over


def test_the_status_line_after_a_run_says_what_just_happened():
    plan = RunPlan(("baseline", "bf16"), "sim", "seed")
    state = run(LessonRun.empty(VARIANTS), plan,
                [result("baseline"), result("bf16", status="oom")])
    longest, *_, shortest = outcome_words(state.outcome, main_is_recording=True, card="H200")
    text = "".join(t for t, _ in longest)
    assert text.startswith("Your run ended (sim, seed scale): 1 ok, 1 OOM (bf16)")
    assert "beside the H200 recording" in text
    assert len("".join(t for t, _ in shortest)) < len(text)  # a form for 80 columns
    played = run(LessonRun.empty(VARIANTS), PLAYBACK, RECORDED.results)
    text = "".join(t for t, _ in outcome_words(played.outcome, main_is_recording=True)[0])
    assert text.startswith("▶ Played back the H200 recording: 3 ok") and "y runs it yourself" in text
    ready = fold(LessonRun.empty(VARIANTS), Settings("auto", "seed", "sim", main_recording=True,
                                                     card="H200"))
    assert "r plays the H200 recording" in "".join(t for t, _ in idle_words(ready)[0])


def test_a_lesson_recorded_on_another_card_names_that_card_everywhere():
    # given a lesson whose recordings ran on an H100 (lesson 27's did), not the course's H200
    from types import SimpleNamespace as NS

    from lab.tui import lesson_plans as plans
    from lab.tui.lesson_words import empty_hint, live_heading

    h100 = DeviceInfo("NVIDIA H100 80GB HBM3", "cuda")
    recordings = {v: RunResult(lesson="l", variant=v, mode="cuda", scale="seed", device=h100,
                               status="ok", peak=Peak(bytes=10**9)) for v in VARIANTS}
    lesson = NS(variants=[NS(name=v) for v in VARIANTS])
    card = plans.recorded_card(lesson, recordings)
    plan = plans.playback_plan(VARIANTS, recordings["baseline"])
    # when the screen says what r does, plays it back and says what happened
    ready = fold(LessonRun.empty(VARIANTS), Settings("auto", "seed", "sim", True, card))
    played = run(ready, plan, list(recordings.values()))
    said = [*("".join(t for t, _ in w) for w in idle_words(ready)), live_heading(plan),
            "".join(t for t, _ in empty_hint(True, card)),
            *("".join(t for t, _ in w) for w in outcome_words(played.outcome, True, card))]
    # then every line names the H100, none the H200
    assert card == plan.card == "H100"
    assert all("H100" in line for line in said[:5]), said
    assert not any("H200" in line for line in said), said
    assert "recorded on an H100" in said[3]


def test_restored_results_come_back_in_the_lessons_order():
    mine = ResultSet([result("bf16"), result("baseline")], LIVE)
    state = fold(LessonRun.empty(VARIANTS), Restored(mine, RECORDED, "from your last session"))
    assert [r.variant for r in state.lead.results] == ["baseline", "bf16"]
    assert state.restored == "from your last session"
    state = run(state, PLAYBACK, RECORDED.results)
    assert state.restored is None  # new results on screen: not the old session's any more


def test_the_version_line_follows_the_code_paths_taken():
    # the engine names the paths: a line only where they differ, said once
    mine = [result("baseline"), result("bf16")]
    rec = [result("baseline", "cuda"), result("bf16", "cuda")]
    for r, attn in zip(mine + rec, ("math", "math", "math", "flash")):
        r.code_paths = CodePaths([attn], "foreach")  # read from the run's op trace
    line = code_path_line(mine, rec)
    assert line is not None and "attention math (the recording: flash) in bf16" in line[0]
    assert "peaks bf16 1.00 GB vs 1.00 GB recorded" in line[0]  # with both numbers
    rec[1].code_paths = CodePaths(["math"], "foreach")
    assert code_path_line(mine, rec) is None
    # until the fields exist: the versions that choose the paths, in one line
    mine = [result("baseline", torch_version="2.13.0+cpu", transformers_version="5.24.0")]
    rec = [result("baseline", "cuda", torch_version="2.11.0+cu130", transformers_version="5.24.1")]
    line = code_path_line(mine, rec)
    assert line is not None and "torch 2.13" in line[0] and "2.11" in line[0]
    assert "transformers" not in line[0]  # 5.24 on both sides
    rec[0].torch_version = "2.13.1"
    assert code_path_line(mine, rec) is None


def test_side_by_side_the_status_line_follows_the_first_and_each_keeps_its_timeline():
    plan = RunPlan(("baseline", "bf16", "fp16"), "sim", "seed")
    state = fold(LessonRun.empty(VARIANTS), Begin(plan))
    for name, pos in (("baseline", 0), ("bf16", 1)):
        state = fold(state, Streamed(name, pos, 3, {"type": "queued"}))
    state = fold(state, Streamed("bf16", 1, 3, {"type": "sample", "events": 5, "live_bytes": 70,
                                                "phase": "forward 0"}))
    state = fold(state, Streamed("baseline", 0, 3, {"type": "sample", "events": 2,
                                                    "live_bytes": 40, "phase": "model"}))
    assert state.current == "baseline" and state.phase == "model" and state.live_bytes == 40
    assert state.spark == (40.0,)  # bf16's bytes are its own, not the status line's
    assert state.live_of("bf16").y == (70,) and state.live_of("baseline").y == (40,)
    words = "".join(t for t, _ in progress_forms(state)[0])
    assert words.startswith("▶ baseline (0/3 done, +1 beside it)")
    state = fold(state, VariantDone(result("baseline"), 0, 3))
    assert state.current == "bf16" and state.position == 1 and state.phase is None
    state = fold(state, Streamed("bf16", 1, 3, {"type": "sample", "events": 9, "live_bytes": 90,
                                                "phase": "backward 0"}))
    assert state.phase == "backward 0" and state.live_bytes == 90
    assert "".join(t for t, _ in progress_forms(state)[0]).startswith("▶ bf16 (2/3)")


def test_side_by_side_at_80_columns_the_status_line_keeps_the_phase_and_the_live_bytes():
    """The running line has 53 columns at 80 (padding, a blank and the 24-column sparkline
    take the rest); with two variants side by side its longest form is wider, and a shorter one keeps
    what is moving: the variant, the phase, the live bytes (the time is appended after)."""
    from rich.console import Console
    from rich.text import Text

    from lab.tui.widgets.fit import Fit

    plan = RunPlan(("baseline", "bf16", "fp16"), "sim", "seed")
    state = fold(LessonRun.empty(VARIANTS), Begin(plan))
    for name, pos in (("baseline", 0), ("bf16", 1)):
        state = fold(state, Streamed(name, pos, 3, {"type": "queued"}))
    state = fold(state, Streamed("baseline", 0, 3, {"type": "status", "stage": "starting",
                                                    "text": "worker ready"}))
    state = fold(state, Streamed("baseline", 0, 3, {"type": "sample", "events": 2,
                                                    "live_bytes": 40, "phase": "forward 0"}))
    assert state.service == ""  # the service's word about a worker is over once it runs
    state = fold(state, Streamed("baseline", 0, 3, {"type": "sample", "events": 3,
                                                    "live_bytes": 14_780_000_000,
                                                    "phase": "forward 0"}))
    forms = [Text.assemble(*progress, (" · 12 s", "")) for progress in progress_forms(state)]
    assert "+1 beside it" in forms[0].plain and "Esc cancels" in forms[0].plain
    console = Console(width=53, record=True)
    console.print(Fit(*forms))
    line = console.export_text().rstrip("\n")
    assert "\n" not in line  # one line, not wrapped or cut
    for part in ("baseline", "+1", "forward 0", "14.78 GB", "12 s"):
        assert part in line
