"""Several ranks' snapshots side by side (`memlab diff r0 r1 r2`, lab.snapshots.ranks)."""

from __future__ import annotations

import json
import pickle

import pytest

from lab.snapshots.ranks import rank_label, rank_view

MiB = 1 << 20


def _snapshot(sizes: list[int], where: str = "train.py") -> dict:
    """A trace that allocates `sizes` (MiB) and keeps them all: its peak is their sum."""
    frames = [{"filename": where, "line": 10 + k, "name": "step"} for k in range(len(sizes))]
    entries, addr = [], 1 << 40
    for k, n in enumerate(sizes):
        entries.append({"action": "alloc", "addr": addr, "size": n * MiB, "stream": 0,
                        "time_us": k, "frames": [frames[k]]})
        addr += n * MiB
    return {"segments": [], "device_traces": [entries]}


@pytest.fixture
def ranks(tmp_path):
    out = []
    for r, sizes in enumerate([[100, 50], [100, 50], [100, 250], [100, 52]]):
        p = tmp_path / f"snapshot_rank{r}.pkl"
        p.write_bytes(pickle.dumps(_snapshot(sizes)))
        out.append(p)
    return out


def test_the_ranks_side_by_side_name_the_heavy_one_and_what_differs(ranks):
    r = rank_view(ranks)
    assert [s.label for s in r.sides] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert r.heaviest == 2 and r.lightest == 0 and r.outlier == 2
    assert r.spread_bytes == 200 * MiB
    # the site that differs: line 11 (the second allocation), 50 / 50 / 250 / 52 MiB
    where, per_rank = next(iter(r.top_sites.items()))
    assert "train.py:11" in where and per_rank == [50 * MiB, 50 * MiB, 250 * MiB, 52 * MiB]
    assert r.pair.peak_delta_bytes == 200 * MiB  # the heaviest against the lightest


def test_the_cli_prints_the_rank_view_and_its_json(ranks, capsys):
    from lab.cli import main

    assert main(["diff", *map(str, ranks), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "ranks" and d["spread_bytes"] == 200 * MiB and len(d["sides"]) == 4
    assert main(["diff", *map(str, ranks)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 ranks") and "rank 2 stands apart" in out
    assert main(["diff", *map(str, ranks), "--variant", "x"]) == 2
    assert "--variant" in capsys.readouterr().err


def test_rank_numbers_are_read_from_file_names():
    assert rank_label("out/snapshot_rank12.pkl") == "rank 12"
    assert rank_label("mem_r3.pickle") == "rank 3"
    assert rank_label("job-7.pkl.gz") == "rank 7"
    assert rank_label("baseline.pkl") == "baseline.pkl"
