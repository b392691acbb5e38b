"""Claims read like a reader reads them: by rounding, with the stated unit (lab/claims.py)."""

import pytest

from lab.claims import Claim, ClaimError, claim_from_toml, parse_value, verify
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


def test_faster_needs_a_difference_larger_than_the_recorded_spreads():
    # medians 100 and 97 ms; spreads 1 + 1 ms: a 3 ms difference is a finding
    runs = {"old": timed("old", [0.0995, 0.100, 0.1005, 0.100, 0.100]),
            "new": timed("new", [0.0965, 0.097, 0.0975, 0.097, 0.097])}
    assert verify(faster(), runs) is None
    # the same medians, spreads 1 + 2.5 ms: inside the noise, whatever the direction says
    runs["new"] = timed("new", [0.0955, 0.097, 0.098, 0.097, 0.097])
    problem = verify(faster(), runs)
    assert "within the recorded spreads (2.5 + 1.0 ms)" in problem
    assert "without a direction" in problem
    # numbers without a direction stay checkable
    assert verify(Claim("x", "new", "step_time", value="97 ms"), runs) is None


def test_without_a_recorded_spread_a_difference_under_two_percent_is_not_a_finding():
    runs = {"old": run("old", 10**9, step=0.4941), "new": run("new", 10**9, step=0.5012)}  # +1.4 %
    problem = verify(Claim("x", "new", "step_time", relative_to="old", direction="higher"), runs)
    assert "+1.4%" in problem and "2% of old's step time" in problem
    runs["new"] = run("new", 10**9, step=0.5162)  # +4.5 %
    assert verify(Claim("x", "new", "step_time", relative_to="old", direction="higher"), runs) is None
    # "about the same" is not a faster/slower claim: its own tolerance decides
    runs["new"] = run("new", 10**9, step=0.4970)
    assert verify(Claim("x", "new", "step_time", relative_to="old", direction="same",
                        tolerance=0.03), runs) is None


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
    from lab.ground_truth import GroundTruthRun

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
