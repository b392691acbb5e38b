"""Many GPUs (issue 13): DDP, ZeRO-1 and FSDP2 on ranks that are real (gloo, one process each)
or simulated (the fake process group, one process); lesson 22's formulas against the sim.

Quick: the tracker's view of FSDP2 (shards, resized all-gather buffers), each strategy's model
states in sim at 2 and 8 ranks against their analytic bytes, the tokens and the requests.
Slow: the lesson's formulas at seed scale, two real gloo ranks per variant against the sim, the
compare CLI, and (once recorded) the sim against the two-H200 recordings.
"""

from __future__ import annotations

import functools

import json
from pathlib import Path

import pytest
import torch

from lab.course.curriculum import load_course
from lab.measure.distributed import VALIDATED_RANKS, extrapolation_note
from lab.measure.sim.dtensor import (expand_once_per_kind, meta_once_per_kind,
                                     strided_flag_once_per_op)
from lab.measure.sim.ranks import _LazyChunks
from lab.runner.protocol import RunRequest
from lab.runner.worker import load_experiment, measure_request
from lab.workloads import TrainConfig, parse_combo
from lab.workloads.config import ComboError

from ..shared_runs import shared
from .test_lesson_effects import measured

LESSON = next(l for l in load_course().lessons if l.id == "many-gpus")
EXPERIMENT = load_experiment(str(LESSON.experiment_path))
VARIANTS = [v.name for v in LESSON.variants]
RECORDED = [v.name for v in LESSON.variants if v.recorded]  # not fsdp_offload: simulated only


@functools.lru_cache(maxsize=None)
def sim(variant: str, world_size: int, scale: str = "small", sim_rank: int = 0):
    """The variant in sim as rank `sim_rank` of `world_size`, once per session (several tests
    compare the same run: the formulas, each H200 rank, the gloo ranks)."""
    if (scale, world_size, sim_rank) == ("seed", LESSON.params("seed")["world_size"], 0):
        return measured(LESSON.key, variant, "sim")  # the lesson as it is: test_lesson_effects' run
    return shared(("many-gpus", variant, world_size, scale, sim_rank),
                  lambda: _sim(variant, world_size, scale, sim_rank))


def _sim(variant: str, world_size: int, scale: str, sim_rank: int):
    req = RunRequest.for_lesson(LESSON, variant, "sim", scale, timing=False,
                                overrides={"world_size": world_size, "sim_rank": sim_rank})
    return measure_request(req, getattr(EXPERIMENT, variant))


def live_at_end(result, phase: str, category: str) -> int:
    """Bytes of `category` live when `phase` ended (from the downsampled timeline's last point
    inside the phase: the phase's end_index is an event index)."""
    ph = result.phase(phase)
    tl = result.timeline
    idx = max(i for i, x in enumerate(tl.index) if x < ph.end_index)
    return tl.by_category.get(category, [0] * len(tl.index))[idx]


def param_count(p) -> int:
    kv = p["kv_heads"] * p["hidden"] // p["heads"]
    h, f = p["hidden"], p["ff"]
    return p["vocab"] * h + p["layers"] * (2 * h * h + 2 * h * kv + 3 * h * f + 3 * h + 2 * kv) + h


# ---- quick -------------------------------------------------------------------------------------
def test_the_lesson_runs_on_world_size_ranks_and_states_its_parameter_count():
    for scale in ("seed", "small"):
        p = LESSON.params(scale)
        assert p["param_count"] == param_count(p)  # the formulas' P is the model's
        assert LESSON.ranks(scale, "cuda") == LESSON.ranks(scale, "cpu") == p["world_size"] == 2
        assert LESSON.ranks(scale, "sim") == 1  # simulated in one process
        assert LESSON.ranks(scale, "cpu", {"world_size": 8}) == 8  # --gpus 8


@pytest.mark.parametrize("size,n", [(0, 2), (1, 8), (5, 3), (768, 1024), (50257, 2), (1024, 8)])
def test_lazy_chunks_are_torch_chunk_padded(size, n):
    t = torch.arange(size * 3).view(size, 3)
    eager = list(torch.chunk(t, n, 0))
    eager += [eager[0].new_empty(0)] * (n - len(eager))
    lazy = _LazyChunks(t, n, 0)
    assert len(lazy) == n
    for k in range(n):
        assert lazy[k].shape == eager[k].shape and torch.equal(lazy[k], eager[k])


def test_a_foreach_ops_strided_shard_flag_is_looked_for_once_per_op():
    """sim's shortcut of DTensor's per-output scan (quadratic in the parameters): the full
    function runs only for an op with a _StridedShard input, and then for every output."""
    from types import SimpleNamespace

    from lab.measure.torch_compat import dtensor_target

    target = dtensor_target("strided_flag")
    if target is None:
        pytest.skip("this torch's DTensor has no _propagate_use_strided_shard_flag")
    owner, name, strided = target
    from torch.distributed.tensor.placement_types import Shard

    calls = []
    original = getattr(owner, name)
    setattr(owner, name, lambda strategy, schema: calls.append((strategy, schema)))
    try:
        def schema(*placements):
            return SimpleNamespace(args_spec=[SimpleNamespace(placements=(p,)) for p in placements])

        plain, mixed = schema(Shard(0), Shard(0)), schema(Shard(0), strided(0, split_factor=2))
        with strided_flag_once_per_op():
            for child in range(3):
                getattr(owner, name)(child, plain)
            for child in range(3):
                getattr(owner, name)(child, mixed)
        assert calls == [(0, mixed), (1, mixed), (2, mixed)]
    finally:
        setattr(owner, name, original)
    with strided_flag_once_per_op():
        assert getattr(owner, name) is not original
    assert getattr(owner, name) is original  # put back after


def test_a_foreach_ops_sharding_is_found_once_per_kind_of_element_to_the_same_answer():
    """sim's shortcuts of DTensor's per-element work on a foreach op (Adam's over FSDP2's
    shards): the strategies are expanded, and the op run for its outputs' metadata, over one
    element of each kind, and what DTensor decides (the outputs' specs and metadata, the inputs
    it redistributes) is what it decides element by element."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor._op_schema import OpSchema

    from lab.measure.torch_compat import dtensor_target, fake_store

    targets = [dtensor_target("foreach_expand"), dtensor_target("foreach_meta")]
    if None in targets:
        pytest.skip("this torch's DTensor has not what sim's shortcuts wrap")
    aten = torch.ops.aten
    dist.init_process_group("fake", store=fake_store(), rank=0, world_size=2)
    try:
        mesh = init_device_mesh("cpu", (2,))

        def specs(*placed, dtype=torch.float32):  # 6 elements (global shapes) of a few kinds
            shapes = [(8, 4), (4,), (8, 4), (8, 4), (4,), (8, 4)]
            return [DTensor.from_local(torch.zeros(s[0] // 2 if p == Shard(0) else s[0], *s[1:],
                                                   dtype=dtype), mesh, [p], run_check=False)._spec
                    for s, p in zip(shapes, placed)]

        sharded = [Shard(0)] * 3 + [Replicate()] + [Shard(0)] * 2
        mixed = [Shard(0), Replicate(), Shard(0), Replicate(), Replicate(), Shard(0)]
        cases = [(aten._foreach_add_.List, (specs(*sharded), specs(*mixed))),
                 (aten._foreach_mul.Scalar, (specs(*sharded), 0.5)),
                 # the scalars are the elements' too: int64 * 2 stays int64, * 2.5 is float
                 (aten._foreach_mul.ScalarList,
                  (specs(*sharded, dtype=torch.int64), [2, 2.5, 2, 2, 2.5, 2.5])),
                 (aten._foreach_addcdiv_.ScalarList,
                  (specs(*sharded), specs(*sharded), specs(*mixed), [0.1] * 6)),
                 (aten._foreach_lerp_.Scalar, (specs(*sharded), specs(*sharded), 0.1)),
                 (aten._foreach_sqrt.default, (specs(*sharded),))]
        prop = DTensor._op_dispatcher.sharding_propagator
        fulls, sizes = [getattr(owner, name) for owner, name, _ in targets], []

        def counted(full):  # the tensors per list each call of DTensor's own function gets
            def call(*args):
                lists = [getattr(a, "children", a) for a in args[1].args_schema]
                sizes.append(max(len(a) for a in lists if isinstance(a, (list, tuple)) and a
                                 and not isinstance(a[0], (int, float))))
                return full(*args)

            return call

        for op, args in cases:
            schema = OpSchema(op, args, {}, schema_info=prop.op_to_schema_info.get(op))
            each = prop.propagate_op_sharding_non_cached(schema)
            sizes.clear()
            for (owner, name, _), full in zip(targets, fulls):
                setattr(owner, name, counted(full))
            try:
                with expand_once_per_kind(), meta_once_per_kind():
                    kinds = prop.propagate_op_sharding_non_cached(schema)
            finally:
                for (owner, name, _), full in zip(targets, fulls):
                    setattr(owner, name, full)
            assert len(sizes) == 2 and max(sizes) < 6, (op, sizes)  # one element per kind
            assert kinds.output_spec == each.output_spec, op
            if kinds.output_spec is not None:
                assert [s.tensor_meta for s in kinds.output_spec] == \
                    [s.tensor_meta for s in each.output_spec], op
            assert kinds.redistribute_schema == each.redistribute_schema, op
            assert kinds.needs_redistribute == each.needs_redistribute, op
        answers = [prop.propagate_op_sharding_non_cached(OpSchema(
            op, args, {}, schema_info=prop.op_to_schema_info.get(op))) for op, args in cases]
        assert any(a.needs_redistribute for a in answers)
        assert {s.tensor_meta.dtype for s in answers[2].output_spec} == {torch.int64, torch.float32}
    finally:
        dist.destroy_process_group()
    assert [getattr(owner, name) for owner, name, _ in targets] == fulls  # put back after


def test_the_extrapolation_is_named_beyond_what_was_measured():
    assert extrapolation_note(2) is None and 2 in VALIDATED_RANKS
    note = extrapolation_note(1024)
    assert "rank-0 extrapolation" in note and "NCCL" in note and "CUDA context" in note


@pytest.mark.slow  # the quick tier's 2 minutes: simulated ranks, ~4 CPU-s each
@pytest.mark.parametrize("n", [2, 8])
def test_model_states_per_rank_in_sim_are_the_strategies_bytes(n):
    # Given the small Qwen2 layout (P parameters, every dim divisible by 8, fp32, AdamW), when
    # each strategy runs on n simulated ranks, then at the end of step 1 each rank holds:
    p = LESSON.params("small")
    P, tensors = p["param_count"], 2 + 12 * p["layers"]  # AdamW keeps a 4-byte step per tensor
    want = {  # (parameters, gradients, optimizer state)
        "baseline": (4 * P, 4 * P + 4 * P, 8 * P + 4 * tensors),  # gradients + DDP's buckets
        "fsdp": (4 * P // n, 4 * P // n, 8 * P // n + 4 * tensors),
    }
    for variant, (params, grads, state) in want.items():
        r = sim(variant, n)
        assert r.status == "ok", r.error
        assert r.metrics["world_size"] == n
        rope = live_at_end(r, "step 1", "parameters") - params  # the rotary inv_freq buffer
        assert 0 <= rope <= 256
        assert live_at_end(r, "step 1", "gradients") == grads
        assert live_at_end(r, "step 1", "optimizer_state") == state
    # ZeRO-1 splits whole tensors, largest first: rank 0 gets the embedding's state, and no
    # rank holds more than its share plus one tensor's (the greedy partition's bound)
    embedding = 8 * p["vocab"] * p["hidden"]
    state = live_at_end(sim("zero1", n), "step 1", "optimizer_state")
    assert max(embedding, 8 * P // n) <= state <= 8 * P // n + embedding + 4 * tensors


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_sharding_lowers_the_per_rank_peak_in_sim():
    peaks = {v: sim(v, 2).peak.bytes for v in VARIANTS}
    assert peaks["fsdp"] < peaks["zero1"] < peaks["baseline"]
    assert peaks["fsdp_bf16"] < peaks["fsdp"] and peaks["fsdp_ckpt"] < peaks["fsdp"]
    assert peaks["fsdp_offload"] < peaks["fsdp"]  # the shards and AdamW's state on the host
    eight = sim("fsdp", 8)
    assert eight.peak.bytes < peaks["fsdp"]  # more ranks, smaller shards
    assert any("rank-0 extrapolation" in n for n in eight.notes)


def test_fsdp_unsharded_blocks_are_parameters_and_ddp_buckets_are_gradients():
    r = sim("fsdp", 2)
    p = LESSON.params("small")
    root = 4 * (p["vocab"] * p["hidden"] + p["hidden"])  # tied embedding + final norm
    block = (4 * p["param_count"] - root) // p["layers"]
    assert r.metrics["fsdp_unsharded_block_bytes"] == max(root, block)  # the largest group
    # at the peak: every shard, and the root group, all-gathered from forward to backward
    assert r.peak.by_category["parameters"] >= 4 * p["param_count"] // 2 + root
    d = sim("baseline", 2)
    assert d.metrics["ddp_bucket_bytes"] == 4 * p["param_count"]  # one bucket of every gradient


def test_the_parallel_tokens():
    assert parse_combo("fsdp+bf16").label == "fsdp+bf16" == parse_combo("bf16+fsdp").label
    assert parse_combo("ckpt+fsdp").parallel == "fsdp"
    assert TrainConfig(parallel="zero1").kinds() == {"parallel"}
    assert parse_combo("offload+fsdp").label == "fsdp+offload"
    assert parse_combo("fsdp+offload").kinds() == {"parallel", "offload"}
    for bad, why in [("fsdp+fp16", "GradScaler"), ("ddp+accum4", "accumulation"),
                     ("ddp+fsdp", "both choose"), ("eval+ddp", "eval"),
                     ("offload", "with fsdp"), ("ddp+offload", "with fsdp")]:
        with pytest.raises(ComboError, match=why):
            parse_combo(bad)


def test_compare_requests_one_worker_per_rank_except_in_sim():
    from lab.playground import ComparePlan
    from lab.workloads import get_workload

    sizes = get_workload("gpt2-tiny").default_sizes("small")
    combos = [parse_combo(c) for c in ("baseline", "ddp", "fsdp+ckpt")]
    cpu = ComparePlan("gpt2-tiny", sizes, combos, "cpu", "small", gpus=4).requests()
    assert [r.ranks for r in cpu] == [1, 4, 4]
    assert [r.params.get("world_size") for r in cpu] == [None, 4, 4]
    simulated = ComparePlan("gpt2-tiny", sizes, combos, "sim", "small", gpus=1024).requests()
    assert [r.ranks for r in simulated] == [1, 1, 1]
    assert simulated[2].params["world_size"] == 1024


# ---- slow --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 8])
def test_the_formulas_match_the_sim_at_seed_scale(n):
    # the lesson's formula per strategy (lesson.toml [[checks]]) against sim, which takes CUDA's
    # paths (attention kernels, workspaces): the bar on the H200 is 5 %; sim is exact but for
    # ZeRO-1, whose whole-tensor partition puts the embedding's state on rank 0
    for variant in VARIANTS:
        r = sim(variant, n, "seed")
        assert r.status == "ok", r.error
        [check] = r.checks
        tol = 0.02 if variant == "zero1" else 0.001
        assert check.ratio == pytest.approx(1, abs=tol), (variant, check)


@pytest.mark.slow
def test_two_gloo_ranks_hold_what_the_sim_says():
    # Given the runner's torchrun-like start (gloo on CPU, one process per rank), when each
    # variant trains at small scale, then both ranks finish, each with its own timeline, and
    # their model states equal the simulation's byte for byte (the same code path: the fake
    # process group instead of gloo). Activations may differ: CPU attention vs CUDA's in sim.
    assert LESSON.params("small")["world_size"] == 2
    for variant in (v.name for v in LESSON.variants if v.runs_in("cpu")):
        # test_lesson_effects' run of the variant (the same request, made once per session)
        res = measured(LESSON.key, variant, "cpu")
        assert res.status == "ok", (variant, res.error)
        assert [r.metrics["rank"] for r in res.ranks] == [0.0, 1.0]
        expected = sim(variant, 2)
        for r in res.ranks:
            assert r.timeline.by_category and r.phases[0].name == "model"
            for cat in ("parameters", "gradients", "optimizer_state"):
                got, want = live_at_end(r, "step 1", cat), live_at_end(expected, "step 1", cat)
                if variant == "zero1" and cat == "optimizer_state":
                    continue  # rank 1 holds the other part of the state
                assert got == want, (variant, r.metrics["rank"], cat, got, want)


@pytest.mark.slow
def test_compare_cli_simulates_many_gpus(capsys):
    from lab.cli import main

    code = main(["compare", "gpt2-tiny", "--mode", "sim", "--scale", "small", "--gpus", "8",
                 "--combo", "ddp", "--combo", "fsdp", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["gpus"] == 8
    ddp, fsdp = out["rows"]
    assert ddp["status"] == fsdp["status"] == "ok" and fsdp["peak_bytes"] < ddp["peak_bytes"]
    assert all(r["params"]["world_size"] == 8 for r in out["results"])


H200 = Path(__file__).resolve().parents[2] / "assets" / "reference" / LESSON.id


def h200_ranks_and_sims(variant: str):
    """(the H200 recording of each rank, sim of that rank) for a variant with a recording."""
    from lab.measure.result import RunResult

    path = H200 / f"{variant}.json"
    if variant in LESSON.pending or not path.is_file():
        pytest.skip("H200 recording pending")
    rec = RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    ranks = rec.ranks or [rec]
    # ZeRO-1's ranks hold different parts of the optimizer state: simulate that rank
    return [(rank, sim(variant, len(ranks), rec.scale,
                       sim_rank=int(rank.metrics["rank"]) if variant == "zero1" else 0))
            for rank in ranks]


@pytest.mark.slow
@pytest.mark.parametrize("variant", RECORDED)
def test_sim_is_within_3_percent_of_each_h200_rank(variant):
    # issue 13's bar, checked once the two-H200 recording exists (pending until then)
    for rank, r in h200_ranks_and_sims(variant):
        assert r.peak.bytes == pytest.approx(rank.peak.bytes, rel=0.03), (variant, rank.metrics)


@pytest.mark.slow
@pytest.mark.parametrize("variant", RECORDED)
def test_sim_reserves_what_each_h200_rank_reserved(variant):
    """Issue 10's bar for reserved memory (within 5 %). Two things of CUDA's the allocator model
    needs: FSDP2 all-gathers and reduce-scatters on streams of its own, whose blocks the caching
    allocator keeps apart (without them sim reserved 5-12 % too little), and DDP rebuilds its
    one first bucket as 1 MB + 25 MB ones after the first backward (without it, 6 % too much)."""
    for rank, r in h200_ranks_and_sims(variant):
        assert r.allocator.peak_reserved_bytes == pytest.approx(
            rank.allocator.peak_reserved_bytes, rel=0.05), (variant, rank.metrics)
