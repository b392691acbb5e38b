#!/usr/bin/env bash
# The lab's H200 session in one script: every recording and GPU check the course needs, in the
# order that keeps both GPUs of an nvidia-h200-x2 machine busy. Run from the repository root:
#
#   bash bench/h200_session.sh DIR            # everything; results and logs under DIR
#   bash bench/h200_session.sh DIR record     # only the recordings (assets/reference)
#   bash bench/h200_session.sh DIR benches    # only the benches and GPU tests
#   bash bench/h200_session.sh DIR course queue   # or any of: course queue traces gputests
#
# record   every lesson, cuda, seed scale, each run on a GPU of its own (--exclusive, so step
#          times are undisturbed), through one runner service that queues them over the GPUs;
#          memory snapshots (memory_viz format) for the lessons in SNAPSHOT_LESSONS
# benches  GPU 0: the course packed on ONE GPU (bench/course_cuda.py, issue 11's bar), then eight
#          queued lesson-03 runs (bench/queue_h200.py, issue 15's bar); GPU 1 at the same time:
#          the plain-loop allocator traces (bench/h200_hf_traces.py), the raw CUDA snapshot
#          pair for `memlab diff` (tests/fixtures/record_cuda_batch_pair.py), and the GPU tests
#          against the saved recordings (pytest -m cuda tests/gpu)
#
# Prints one line per step; DIR/done holds "ok" when the whole script has finished.
set -u
DIR=${1:?usage: bash bench/h200_session.sh DIR [record|benches|course|queue|traces|gputests]...}
shift
PHASES=${*:-record benches}
SNAPSHOT_LESSONS=${SNAPSHOT_LESSONS:-"08 04"}
MODE=${MODE:-cuda}  # MODE=sim LESSONS="01 16" tries the record phase on a machine without a GPU
ROOT=$(pwd)
mkdir -p "$DIR/logs" "$DIR/reference" "$DIR/snapshots"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export MEMLAB_HOME=${MEMLAB_HOME:-/tmp/memlab-session}
memlab() { python3 -m lab.cli "$@"; }
# GPU_A runs the course and the queue, GPU_B the rest (the same GPU on a one-GPU machine)
GPU_A=${GPU_A:-0}
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] && GPU_B=${GPU_B:-1} || GPU_B=${GPU_B:-0}
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$DIR/logs/session.txt"; }

record() {
  say "record: start ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l) GPUs)"
  local lessons=${LESSONS:-}
  [ -n "$lessons" ] || lessons=$(memlab list --json | python3 -c 'import json,sys; print(" ".join(l["number"] for l in json.load(sys.stdin)))')
  for l in $lessons; do
    local snap=()
    case " $SNAPSHOT_LESSONS " in *" $l "*) snap=(--snapshot "$DIR/snapshots/$l.pkl");; esac
    # every lesson submits at once; the service queues the runs (one GPU each, --exclusive)
    memlab run "$l" --mode "$MODE" --scale seed --exclusive --save "$DIR/reference" "${snap[@]}" \
      > "$DIR/logs/run-$l.txt" 2>&1 &
  done
  wait
  for l in $lessons; do say "record: $l $(grep -cE '✓|ok' "$DIR/logs/run-$l.txt") ok-ish lines; $(tail -n 1 "$DIR/logs/run-$l.txt")"; done
  python3 -c "from lab.runner import remote; remote.stop_service()" 2>/dev/null
  for f in "$DIR"/snapshots/*.pkl; do [ -f "$f" ] && gzip -9 "$f"; done
  say "record: done; $(ls "$DIR"/reference/*/*.json | wc -l) results, snapshots: $(ls "$DIR"/snapshots | tr '\n' ' ')"
}

# One step each, so a session can run only what changed: `... DIR course queue`.
course() {  # issue 11's bar: the course packed on ONE GPU
  CUDA_VISIBLE_DEVICES=$GPU_A timeout 300 python3 bench/course_cuda.py \
    --lessons 01 02 03 07 08 09 10 11 12 13 17 18 19 20 21 \
    --out "$DIR/course_cuda.json" > "$DIR/logs/course_cuda.txt" 2>&1
  say "course on one H200: $(grep -iE 'total|variants in' "$DIR/logs/course_cuda.txt" | tail -n 2 | tr '\n' ' ')"
}
queue() {  # issue 15's bar: eight queued lesson-03 runs on one GPU
  timeout 300 python3 bench/queue_h200.py --lesson 03 --variant baseline --runs 8 --gpu "$GPU_A" \
    --json "$DIR/queue_h200.json" > "$DIR/logs/queue_h200.txt" 2>&1
  say "queue: $(tail -n 1 "$DIR/logs/queue_h200.txt")"
}
traces() {  # the plain-loop allocator traces and the raw CUDA snapshot pair for `memlab diff`
  export CUDA_VISIBLE_DEVICES=$GPU_B
  timeout 240 python3 bench/h200_hf_traces.py --out "$DIR/hf" > "$DIR/logs/hf_traces.txt" 2>&1
  say "hf traces: $(tail -n 1 "$DIR/logs/hf_traces.txt")"
  timeout 120 python3 tests/fixtures/record_cuda_batch_pair.py "$DIR/cuda_batch_pair" \
    > "$DIR/logs/batch_pair.txt" 2>&1
  say "batch pair: $(tail -n 1 "$DIR/logs/batch_pair.txt")"
}
gputests() {  # the GPU tests against the saved recordings (serial: they time the GPU)
  CUDA_VISIBLE_DEVICES=$GPU_B MEMLAB_CUDA_RESULTS="${CUDA_RESULTS:-$DIR/reference}" \
    timeout "${GPUTESTS_TIMEOUT:-300}" python3 -m pytest -q -m cuda tests/gpu \
    -p no:cacheprovider -o addopts="" > "$DIR/logs/pytest_cuda.txt" 2>&1
  say "pytest -m cuda: $(tail -n 1 "$DIR/logs/pytest_cuda.txt")"
}
benches() {  # GPU 0: course then queue; GPU 1 (GPU 0 after them on a one-GPU machine): the rest
  say "benches: start"
  if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
    ( course; queue ) &
    ( traces; gputests ) &
    wait
  else
    course; queue; traces; gputests
  fi
  say "benches: done"
}

for phase in $PHASES; do "$phase"; done
echo ok > "$DIR/done"
say "session done"
