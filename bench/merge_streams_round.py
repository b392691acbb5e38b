"""Merge the GPU round of issue 42 (lesson 28 and the side-stream allocator traces) into the tree.

    python bench/merge_streams_round.py DIR      DIR: what the device run left in $OUT

The device command (docs/RECORDING.md) leaves DIR/reference/overlapped-offload/<variant>.json
(`bash bench/h200_round.sh DIR 28`) and DIR/traces/stream_traces.json.gz (`... streams`). This:
- copies the recordings into assets/reference/overlapped-offload/ (each one's status must be ok);
- copies the traces to tests/fixtures/h200_stream_traces.json.gz and replays them
  (bench/stream_traces.py --check: the model minus the GPU, to the byte is the goal);
- deletes lesson 28's `pending = true` (and its comment line), once every variant is recorded.
Then run `memlab dev cite` and `memlab dev check` (the claims against the recording) and
`pytest tests/unit/test_allocator_stream_traces.py`; a claim the recording contradicts is the
text's to change, not the recording's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "lessons" / "28-overlapped-offload"
REFERENCE = ROOT / "assets" / "reference" / "overlapped-offload"
FIXTURE = ROOT / "tests" / "fixtures" / "h200_stream_traces.json.gz"
ALLOW_OFF_GPU = False  # the merge test sets it (a sim "round" stands for the GPU's)
PENDING = ("# Recordings are made on the GPU (docs/RECORDING.md); until then:\n", "pending = true\n")


def merge_recordings(src: Path) -> list[str]:
    """The variants copied; raises SystemExit on a recording that did not run."""
    folder = src / "reference" / "overlapped-offload"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    runs = {f.name: json.loads(f.read_text()) for f in files}
    bad = [n for n, r in runs.items() if r.get("status") != "ok"]
    if bad:
        raise SystemExit(f"merge: not merged, these recordings did not run: {', '.join(bad)} "
                         f"(see {src}/logs/run-28.txt)")
    off_gpu = [n for n, r in runs.items() if r.get("mode") != "cuda"]
    if off_gpu and not ALLOW_OFF_GPU:
        raise SystemExit(f"merge: not merged, not GPU recordings: {', '.join(off_gpu)}")
    REFERENCE.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy2(f, REFERENCE / f.name)
    return [f.stem for f in files]


def variants() -> list[str]:
    import tomllib

    return [v["name"] for v in tomllib.loads((LESSON / "lesson.toml").read_text())["variants"]]


def drop_pending() -> bool:
    toml = LESSON / "lesson.toml"
    text = toml.read_text()
    if PENDING[1] not in text:
        return False
    toml.write_text(text.replace(PENDING[0] + PENDING[1], "").replace(PENDING[1], ""))
    return True


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        raise SystemExit("usage: python bench/merge_streams_round.py DIR (the device run's $OUT)")
    src = Path(sys.argv[1])
    done = merge_recordings(src)
    print(f"recordings: {len(done)} merged into {REFERENCE.relative_to(ROOT)}: {', '.join(done) or 'none'}")
    missing = [v for v in variants() if v not in done]
    if missing:
        print(f"lesson 28 stays pending: not recorded: {', '.join(missing)}")
    elif drop_pending():
        print("lesson 28: pending = true deleted")
    traces = src / "traces" / "stream_traces.json.gz"
    if traces.is_file():
        shutil.copy2(traces, FIXTURE)
        print(f"traces: copied to {FIXTURE.relative_to(ROOT)}; the model minus the GPU:")
        subprocess.run([sys.executable, str(ROOT / "bench" / "stream_traces.py"), "--out",
                        str(traces.parent), "--check"], check=False)
    else:
        print(f"traces: none in {traces.parent}")
    print("next: memlab dev cite; memlab dev check; "
          "python -m pytest -q -n 0 tests/unit/test_allocator_stream_traces.py")


if __name__ == "__main__":
    main()
