"""What 2026 snapshots record beyond alloc/free, read and shown (lab.snapshots.extras): the
allocator settings, compile contexts, user metadata, record_function annotations, FX frames,
pinned host memory and private pools; pickle protocol 5."""

from __future__ import annotations

import json
import pickle

from lab.snapshots import open_summary

MiB = 1 << 20


def _snapshot_2026() -> dict:
    fx = {"filename": "<eval_with_key>.3", "line": 7, "name": "forward", "fx_node_name": "mm_1",
          "fx_original_trace": "model.py:12 forward"}
    entries = [
        {"action": "alloc", "addr": 1 << 40, "size": 8 * MiB, "stream": 0, "time_us": 10,
         "frames": [fx], "compile_context": "0/0", "user_metadata": "step 0"},
        {"action": "alloc", "addr": (1 << 40) + 8 * MiB, "size": 4 * MiB, "stream": 0,
         "time_us": 20, "frames": [], "compile_context": "N/A", "user_metadata": "step 1"},
        {"action": "free_completed", "addr": 1 << 40, "size": 8 * MiB, "stream": 0,
         "time_us": 30, "frames": [], "compile_context": "0/0", "user_metadata": "step 1"},
        {"action": "mystery", "time_us": 40},  # a newer action this viewer does not know
    ]
    graph_pool = {"device": 0, "address": 1 << 41, "total_size": 2 * MiB, "stream": 0,
                  "segment_type": "small", "segment_pool_id": (1, 0), "blocks": []}
    return {"segments": [graph_pool], "device_traces": [entries],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                   "expandable_segments": True},
            "external_annotations": [
                {"device": 0, "stage": "START", "name": "## forward ##", "time_us": 5},
                {"device": 0, "stage": "END", "name": "## forward ##", "time_us": 25}],
            "host_segments": [{"total_size": 4 * MiB, "blocks": [
                {"size": MiB, "state": "active_allocated"}, {"size": 3 * MiB,
                                                             "state": "inactive"}]}]}


def test_the_2026_fields_are_read(tmp_path):
    p = tmp_path / "new.pickle"
    p.write_bytes(pickle.dumps(_snapshot_2026(), protocol=5))
    [s] = open_summary(p)
    x = s.extras
    assert x.settings_recorded and x.alloc_conf == "expandable_segments:True"
    assert x.compile_contexts == {"0/0": 2}  # "N/A" is no context
    assert x.user_metadata == {"step 0": 1, "step 1": 2}
    [r] = x.regions
    assert (r.name, r.start_us, r.end_us) == ("## forward ##", 5, 25)
    assert x.fx_frames == 1
    assert (x.host_reserved, x.host_allocated) == (4 * MiB, MiB)
    assert x.private_pools == {"(1, 0)": 2 * MiB}
    assert x.unknown_actions == {"mystery": 1}


def test_view_shows_them_in_text_and_json(tmp_path, capsys):
    from lab.cli import main

    p = tmp_path / "new.pickle"
    p.write_bytes(pickle.dumps(_snapshot_2026(), protocol=5))
    assert main(["view", str(p), "--no-timeline"]) == 0
    out = capsys.readouterr().out
    for said in ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "torch.compile contexts: 0/0",
                 "_set_memory_metadata): step 1 (2)", "record_function): ## forward ##",
                 "FX node", "pinned host memory", "private memory pools", "mystery (1)"):
        assert said in out, said
    assert main(["view", str(p), "--json", "--no-timeline"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["extras"]["user_metadata"] == {"step 0": 1, "step 1": 2}
