"""Claims read like a reader reads them: by rounding, with the stated unit (lab/claims.py)."""

import pytest

from lab.claims import Claim, ClaimError, claim_from_toml, parse_value, verify
from lab.measure.result import AllocatorStats, DeviceInfo, Peak, RunResult


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


def test_step_times_have_slack_bytes_do_not():
    assert verify(Claim("x", "bf16", "step_time", value="67 ms"), RUNS) is None  # 66.0 ms, 3 %
    assert verify(Claim("x", "bf16", "step_time", value="70 ms"), RUNS) is not None


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
