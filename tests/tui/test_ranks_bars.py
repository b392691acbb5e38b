"""A run of several ranks shows one bar per rank (each GPU's memory by category, side by side)."""

from lab.measure.result import DeviceInfo, Peak, RunResult
from lab.tui.widgets.results import bar_rows


def result(variant: str, peak: int, ranks=()) -> RunResult:
    r = RunResult(lesson="many-gpus", variant=variant, mode="cuda", scale="seed",
                  device=DeviceInfo("NVIDIA H200", "cuda"), peak=Peak(bytes=peak))
    r.ranks = list(ranks)
    return r


def test_each_rank_gets_its_own_bar_and_single_runs_one():
    ddp = result("ddp", 40, [result("ddp", 40), result("ddp", 41)])
    single = result("baseline", 30)
    rows = bar_rows([ddp, single], lambda v: "red")
    assert [(label, r.peak.bytes) for label, _, r in rows] == [
        ("ddp · rank 0", 40), ("ddp · rank 1", 41), ("baseline", 30)]


def test_a_simulated_only_variant_reads_not_recorded_beside_the_h200():
    # Given lesson 22's fsdp_offload (modes = ["sim"]: no H200 recording can exist), when the
    # learner's sim run sits beside the H200 recording, then its row says so instead of a dash
    from lab.course.curriculum import load_course
    from lab.tui.provenance import LIVE, RECORDING
    from lab.tui.result_set import ResultSet
    from lab.tui.widgets.tables import versus_table

    lesson = next(l for l in load_course().lessons if l.id == "many-gpus")
    assert not lesson.variant("fsdp_offload").recorded and lesson.variant("fsdp").recorded
    mine = ResultSet([result("fsdp", 30), result("fsdp_offload", 20)], LIVE)
    h200 = ResultSet([result("fsdp", 30)], RECORDING)
    rows = versus_table(lesson, mine, h200).rows
    cells = {str(row[0]): [str(c) for c in row[1:]] for row in rows}
    assert cells["fsdp_offload"][1:] == ["not recorded", "simulated only"]
    assert "not recorded" not in cells["fsdp"]
