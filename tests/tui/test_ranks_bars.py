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
