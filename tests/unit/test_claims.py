"""Claims read like a reader reads them: by rounding, with the stated unit (lab/course/claims.py)."""

import pytest

from lab.course.claims import Claim, ClaimError, claim_from_toml, parse_value, verify
from lab.measure.result import AllocatorStats, DeviceInfo, Peak, RunResult, Timing


def run(variant: str, peak: int, status: str = "ok", step: float | None = None, **cats) -> RunResult:
    return RunResult(lesson="l", variant=variant, mode="cuda", scale="seed",
                     device=DeviceInfo("NVIDIA H200", "cuda"), status=status,
                     peak=Peak(bytes=peak, phase="forward 0", by_category=cats), step_time_s=step,
                     allocator=AllocatorStats(peak_allocated_bytes=peak + 10**7))


RUNS = {"baseline": run("baseline", 14_946_286_608, step=0.178, activations=10_159_235_084),
        "bf16": run("bf16", 12_243_428_056, step=0.066, activations=9_103_000_000),
        "oomy": run("oomy", 16_811_000_000, status="oom")}


@pytest.mark.parametrize("value,ok", [("12.24 GB", True), ("12.2 GB", True), ("12.25 GB", False),
                                      ("12,243,428,056 B", True), ("12,243,428,057 B", False),
                                      ("11.40 GiB", True), ("12243.4 MB", True)])
def test_a_value_reads_as_the_recording_by_rounding(value, ok):
    c = Claim("x", "bf16", "peak", value=value)
    assert (verify(c, RUNS) is None) is ok


@pytest.mark.parametrize("value,ok", [("-18 %", True), ("−18 %", True), ("-17 %", False),
                                      ("0.82×", True), ("-2.70 GB", True), ("-2.8 GB", False)])
def test_relative_values(value, ok):
    c = Claim("x", "bf16", "peak", value=value, relative_to="baseline")
    assert (verify(c, RUNS) is None) is ok


def test_directions_and_what_the_text_says():
    assert verify(Claim("x", "bf16", "peak", relative_to="baseline", direction="lower"), RUNS) is None
    assert "not higher" in verify(Claim("x", "bf16", "peak", relative_to="baseline",
                                        direction="higher"), RUNS)
    bad = Claim("x", "bf16", "peak", relative_to="baseline", direction="lower", says="raises")
    assert "does not read as 'lower'" in verify(bad, RUNS)


def test_step_times_read_as_recorded_like_bytes():
    # the text sits beside the table dev cite renders: "66 ms" cannot stand for 63.7 ms
    assert verify(Claim("x", "bf16", "step_time", value="66 ms"), RUNS) is None  # 66.0 ms
    assert verify(Claim("x", "bf16", "step_time", value="66.0 ms"), RUNS) is None
    assert "reads 66 ms" in verify(Claim("x", "bf16", "step_time", value="67 ms"), RUNS)


def timed(variant: str, steps: list[float]) -> RunResult:
    r = run(variant, 10**9, step=sorted(steps)[len(steps) // 2])
    r.timing = Timing(steps_s=steps, warmup_steps=1, method="one synchronize per step")
    return r


def faster(variant="new", relative_to="old") -> Claim:
    return Claim("x", variant, "step_time", relative_to=relative_to, direction="lower", says="faster")


def test_faster_needs_every_timed_step_beyond_every_step_of_the_other():
    # medians 100 and 97 ms, five steps each, apart: a rank test's p = 2/252, a finding
    runs = {"old": timed("old", [0.0995, 0.100, 0.1005, 0.100, 0.100]),
            "new": timed("new", [0.0965, 0.097, 0.0975, 0.097, 0.097])}
    assert verify(faster(), runs) is None
    # the same medians, one slow step of `new` among `old`'s: they overlap, whatever the medians say
    runs["new"] = timed("new", [0.0965, 0.097, 0.1001, 0.097, 0.097])
    problem = verify(faster(), runs)
    assert "they overlap" in problem and "without a direction" in problem
    # numbers without a direction stay checkable
    assert verify(Claim("x", "new", "step_time", value="97 ms"), runs) is None


def test_a_spread_larger_than_the_gap_does_not_hide_a_clean_difference():
    # every step of `slow` above every step of `fast`, although the gap of the medians (10 ms) is
    # smaller than their spreads together (8 + 9 ms): lesson 24's offloaded checkpointing
    runs = {"fast": timed("fast", [0.070, 0.0695, 0.0792, 0.0703, 0.0710]),
            "slow": timed("slow", [0.0889, 0.0890, 0.0875, 0.0937, 0.0855])}
    assert verify(Claim("x", "slow", "step_time", relative_to="fast", direction="higher"), runs) is None


def test_too_few_steps_are_no_finding_even_apart():
    # three against three, apart: p = 2/20 = 0.1
    runs = {"old": timed("old", [0.100, 0.101, 0.102]), "new": timed("new", [0.090, 0.091, 0.092])}
    assert "too few steps" in verify(faster(), runs)


def test_about_the_same_is_what_a_direction_is_not():
    # overlapping steps, medians within the tolerance: the same
    runs = {"old": timed("old", [0.1730, 0.1735, 0.1740, 0.1736, 0.1733]),
            "new": timed("new", [0.1725, 0.1738, 0.1729, 0.1731, 0.1727])}
    same = Claim("x", "new", "step_time", relative_to="old", direction="same", tolerance=0.03)
    assert verify(same, runs) is None
    # 1 ms apart in every step (lesson 12): inside 3 %, but every step of one is below the other's
    runs["new"] = timed("new", [0.1725, 0.17251, 0.1726, 0.17265, 0.1725])
    assert "not the same; state the direction" in verify(same, runs)


def test_a_recording_without_timed_steps_backs_no_step_time_direction():
    runs = {"old": run("old", 10**9, step=0.4941), "new": run("new", 10**9, step=0.6012)}  # +22 %
    problem = verify(Claim("x", "new", "step_time", relative_to="old", direction="higher"), runs)
    assert "no timed steps" in problem and "without one" in problem
    assert verify(Claim("x", "new", "step_time", value="601.2 ms"), runs) is None


def test_a_run_on_several_ranks_compares_every_ranks_steps():
    # rank 1 of `new` is as slow as `old`: not every step of `new` is faster
    old, new = timed("old", [0.100] * 5), timed("new", [0.090] * 5)
    new.ranks = [timed("new", [0.090] * 5), timed("new", [0.1001] * 5)]
    assert "they overlap" in verify(faster(), {"old": old, "new": new})
    # and rank n's own numbers can be stated
    assert verify(Claim("x", "new", "rank:1:step_time", value="100.1 ms"), {"new": new}) is None
    assert verify(Claim("x", "new", "step_max", value="100.1 ms"), {"new": new}) is None
    assert verify(Claim("x", "new", "rank:0:step_min", value="90 ms"), {"new": new}) is None


def test_status_and_missing_numbers():
    assert verify(Claim("x", "oomy", "status", value="oom"), RUNS) is None
    assert "no cuda recording" in verify(Claim("x", "fp16", "peak", value="1 GB"), RUNS)


def test_toml_errors_are_one_line_and_name_the_field():
    with pytest.raises(ClaimError, match="quantity 'peek'"):
        claim_from_toml({"id": "a", "variant": "b", "quantity": "peek", "value": "1 GB"})
    with pytest.raises(ClaimError, match="unknown unit"):
        parse_value("3 furlongs")
    with pytest.raises(ClaimError, match="states nothing"):
        claim_from_toml({"id": "a", "variant": "b", "quantity": "peak"})
    with pytest.raises(ClaimError, match="needs relative_to"):
        claim_from_toml({"id": "a", "variant": "b", "quantity": "peak", "direction": "lower"})


def test_a_claim_renders_as_the_text_states_it():
    assert Claim("x", "b", "peak", value="-0.20 GB").rendered() == "−0.20 GB"
    assert Claim("x", "b", "peak", relative_to="a", direction="lower").rendered() == "lower"


def test_a_spread_is_a_quantity_the_text_can_state():
    # the slowest timed step minus the fastest: 0.1003 - 0.0995 s
    runs = {"a": timed("a", [0.0995, 0.100, 0.1003, 0.100, 0.100])}
    assert verify(Claim("x", "a", "step_spread", value="0.8 ms"), runs) is None
    assert "reads 0.8 ms" in verify(Claim("x", "a", "step_spread", value="1.0 ms"), runs)
    # a recording without `timing` has no spread to state
    assert "has no step_spread" in verify(Claim("x", "bf16", "step_spread", value="1 ms"), RUNS)


def test_a_superseded_claim_names_a_date_and_checks_no_fresh_runs():
    base = {"id": "a", "variant": "b", "quantity": "step_time", "value": "206.6 ms"}
    assert claim_from_toml({**base, "superseded": "2026-11-30"}).superseded == "2026-11-30"
    with pytest.raises(ClaimError, match="superseded 'last week'"):
        claim_from_toml({**base, "superseded": "last week"})
    with pytest.raises(ClaimError, match="no also"):
        claim_from_toml({**base, "superseded": "2026-11-30", "relative_to": "c",
                         "direction": "higher", "also": ["sim"]})


def test_a_ground_truth_claim_states_what_the_ground_truth_records():
    # Given the H200 ground truth, which keeps max allocated, max reserved and the status per
    # case, then a claim backed by it may state those and nothing else
    base = {"id": "a", "variant": "b", "quantity": "allocated", "value": "15.17 GB",
            "source": "ground_truth"}
    assert claim_from_toml(base).source == "ground_truth"
    assert claim_from_toml({**base, "source": "recording"}).source == "recording"
    with pytest.raises(ClaimError, match="records only allocated, reserved, status"):
        claim_from_toml({**base, "quantity": "peak"})
    with pytest.raises(ClaimError, match="source 'h200'"):
        claim_from_toml({**base, "source": "h200"})
    with pytest.raises(ClaimError, match="mode cuda"):
        claim_from_toml({**base, "mode": "sim"})


def test_a_ground_truth_claim_reads_the_case_as_recorded():
    from lab.course.ground_truth import GroundTruthRun

    def case(alloc):
        return GroundTruthRun("hf/x/fp32", "hf_loop.py", (), "ok", alloc, alloc + 10**9,
                              "NVIDIA H200", "2.11", "5.24", "2026-12-02")

    runs = {"a": case(15_173_776_896), "b": case(4_972_428_800)}
    gt = dict(quantity="allocated", source="ground_truth")
    assert verify(Claim("x", "a", value="15.17 GB", **gt), runs) is None
    assert verify(Claim("x", "b", value="-67 %", relative_to="a", direction="lower", **gt),
                  runs) is None
    problem = verify(Claim("x", "a", value="15.20 GB", **gt), runs)
    assert "the ground truth reads 15.17 GB" in problem
    assert "no ground truth of variant 'c'" in verify(Claim("x", "c", value="1 GB", **gt), runs)
