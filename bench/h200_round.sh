#!/usr/bin/env bash
# One H200 session for this round's issues, in resumable steps (a step whose results are there
# is skipped, so a second call after a cut-off redoes only what is missing). From the repository
# root, on a machine where `python3` holds torch:
#
#   bash bench/h200_round.sh DIR STEP...      steps, in the order given:
#     setup        install the carried wheels: torchao + liger-kernel (lessons 06, 14) into
#                  /tmp/extras; transformers 5.24 (the ground truth's, as sim runs here) into /tmp/gt
#     gt           the ground truth of issue 22 (bench/ground_truth/run_h200.py), GT_BUDGET s
#     compiled     issue 22's compiled-script GPU test (tests/gpu/test_profile_compiled_cuda.py)
#     NN | ID      record lesson NN (its key: the teaching order, not the folder's number) or
#                  lesson ID (overlapped-offload): every variant, cuda, seed scale, a GPU of its own
#                  (--exclusive), into DIR/reference (04 also writes its memory snapshots;
#                  SNAPSHOTS=1: every lesson's, into DIR/snapshots)
#     traces       lesson 23's allocator traces (bench/allocator_settings_traces.py)
#     streams      side-stream allocator traces (bench/stream_traces.py, issue 42) into DIR/traces
#     gputests     `pytest -m cuda tests/gpu` against assets/reference with DIR/reference over it
#
# Lessons record with the device's own transformers (5.17, as every recording); the ground truth
# with the carried 5.24 (what pip gives here, what sim and CI run). Writes DIR/logs/session.txt.
set -u
DIR=${1:?usage: bash bench/h200_round.sh DIR STEP...}
shift
ROOT=$(pwd)
mkdir -p "$DIR/logs" "$DIR/reference" "$DIR/snapshots"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export MEMLAB_HOME=${MEMLAB_HOME:-$DIR/home}
LAB_PATH="$ROOT:/tmp/extras"
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$DIR/logs/session.txt"; }

# The recordings are the H200's: the device tool may hand out an H100 for an H200 (it did on
# 2026-12-06; the memory matched the H200's to the byte, the step times did not), so refuse any
# other card before a minute is spent. ALLOW_CARD=1 records anyway (to compare cards:
# bench/card_vs_card.py).
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
case "$card" in
  *H200*) ;;
  *) if [ "${ALLOW_CARD:-0}" != 1 ]; then
       echo "h200_round: this GPU is '${card:-none}', not an H200: nothing recorded (ALLOW_CARD=1 to record anyway)" >&2
       exit 3
     fi ;;
esac
memlab() { PYTHONPATH=$LAB_PATH python3 -m lab.cli "$@"; }

lesson_id() {
  PYTHONPATH=$ROOT python3 -c "from lab.course.curriculum import load_course; print(load_course().find('$1').id)"
}

# every variant of lesson $1 saved with a status that measured something (ok, or its oom)?
lesson_done() {
  PYTHONPATH=$ROOT python3 - "$1" "$DIR/reference" <<'EOF'
import json, sys
from pathlib import Path
from lab.course.curriculum import load_course
lesson = load_course().find(sys.argv[1])
folder = Path(sys.argv[2]) / lesson.id
ok = all((folder / f"{v.name}.json").is_file()
         and json.loads((folder / f"{v.name}.json").read_text())["status"] in ("ok", "oom")
         for v in lesson.variants)
sys.exit(0 if ok else 1)
EOF
}

record() {
  local key=$1 id snap=()
  id=$(lesson_id "$key")
  if lesson_done "$key"; then say "record $key ($id): saved already, skipped"; return; fi
  # lesson 04 ships its snapshots; SNAPSHOTS=1 keeps every lesson's (one file per variant)
  if [ "$key" = "04" ] || [ "${SNAPSHOTS:-0}" = 1 ]; then snap=(--snapshot "$DIR/snapshots/$key.pkl"); fi
  local t0=$SECONDS
  timeout "${LESSON_TIMEOUT:-420}" bash -c "PYTHONPATH=$LAB_PATH python3 -m lab.cli run $key --mode ${MODE:-cuda} \
    --scale seed --exclusive --save $DIR/reference ${snap[*]}" > "$DIR/logs/run-$key.txt" 2>&1
  say "record $key ($id): rc=$? in $((SECONDS - t0)) s; $(ls "$DIR/reference/$id" 2>/dev/null | wc -l) saved; $(tail -n 1 "$DIR/logs/run-$key.txt")"
}

for step in "$@"; do
  case $step in
    setup)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/extras .whl/torchao-*.whl .whl/liger_kernel-*.whl > "$DIR/logs/setup.txt" 2>&1
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gt .whl/transformers-*.whl .whl/regex-*.whl >> "$DIR/logs/setup.txt" 2>&1
      say "setup: rc=$? $(PYTHONPATH=/tmp/extras python3 -c 'import torch, torchao, transformers; print("torch", torch.__version__, "torchao", torchao.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))' 2>&1 | tail -n 1)" ;;
    gt)
      t0=$SECONDS
      PYTHONPATH=/tmp/gt GT_CARRIED_SITE=/tmp/gt timeout $(( ${GT_BUDGET:-300} + 150 )) \
        python3 bench/ground_truth/run_h200.py --budget-s "${GT_BUDGET:-300}" --case-timeout 200 \
        --out "$DIR/gt" > "$DIR/logs/gt.txt" 2>&1
      say "gt: rc=$? in $((SECONDS - t0)) s; $(tail -n 2 "$DIR/logs/gt.txt" | tr '\n' '|')" ;;
    compiled)
      t0=$SECONDS
      PYTHONPATH=$LAB_PATH timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
        -m cuda tests/gpu/test_profile_compiled_cuda.py > "$DIR/logs/compiled.txt" 2>&1
      say "compiled: rc=$? in $((SECONDS - t0)) s; $(tail -n 1 "$DIR/logs/compiled.txt")" ;;
    traces)
      if [ -f "$DIR/traces/h200_allocator_settings_traces.json.gz" ]; then
        say "traces: recorded already, skipped"
      else
        mkdir -p "$DIR/traces"; t0=$SECONDS
        PYTHONPATH=$LAB_PATH timeout 300 python3 bench/allocator_settings_traces.py --out "$DIR/traces" \
          --fixture > "$DIR/logs/traces.txt" 2>&1
        rc=$?
        cp tests/fixtures/h200_allocator_settings_traces.json.gz "$DIR/traces/" 2>/dev/null
        say "traces: rc=$rc in $((SECONDS - t0)) s; $(tail -n 2 "$DIR/logs/traces.txt" | tr '\n' '|')"
      fi ;;
    streams)
      if [ -f "$DIR/traces/stream_traces.json.gz" ]; then
        say "streams: recorded already, skipped"
      else
        mkdir -p "$DIR/traces"; t0=$SECONDS
        PYTHONPATH=$LAB_PATH timeout 150 python3 bench/stream_traces.py --out "$DIR/traces" \
          > "$DIR/logs/streams.txt" 2>&1
        say "streams: rc=$? in $((SECONDS - t0)) s; $(tail -n 5 "$DIR/logs/streams.txt" | tr '\n' '|')"
      fi ;;
    gputests)
      rm -rf "$DIR/merged"; cp -r assets/reference "$DIR/merged"; cp -r "$DIR/reference/." "$DIR/merged/"
      t0=$SECONDS
      PYTHONPATH=$LAB_PATH MEMLAB_CUDA_RESULTS="$DIR/merged" timeout "${GPUTESTS_TIMEOUT:-360}" \
        python3 -m pytest -q -m cuda tests/gpu -p no:cacheprovider -o addopts="" \
        > "$DIR/logs/pytest_cuda.txt" 2>&1
      say "gputests: rc=$? in $((SECONDS - t0)) s; $(tail -n 1 "$DIR/logs/pytest_cuda.txt")" ;;
    [0-9][0-9]|[a-z]*-*) record "$step" ;;  # a course key (teaching order) or a lesson id
    *) say "unknown step $step" ;;
  esac
done
PYTHONPATH=$ROOT python3 -c "from lab.runner import remote; remote.stop_service()" 2>/dev/null
say "stop: $(find "$DIR/reference" -name '*.json' | wc -l) recordings in $DIR/reference"
