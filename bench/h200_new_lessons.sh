#!/usr/bin/env bash
# Issue 26's H200 session: the recordings of lessons 23-25 (allocator tuning, offloading, the
# memory budget with its challenges' starting points and reference solutions) and the allocator
# traces of lesson 23's PYTORCH_CUDA_ALLOC_CONF settings. Resumable: a step whose results are all
# there is skipped, so running it again after a cut-off redoes only what is missing. Each step
# is one command under `timeout` (< 10 minutes). From the repository root:
#
#   bash bench/h200_new_lessons.sh DIR            # every step (about 10 minutes on one H200)
#   bash bench/h200_new_lessons.sh DIR 23 traces  # or some of: 23 24 25a 25b traces
#   MODE=sim bash bench/h200_new_lessons.sh DIR   # a dry run without a GPU (traces: --cpu)
# `python3` must be the interpreter with torch and the lab's requirements (PATH=.venv/bin:$PATH).
#
# Writes under DIR:
#   reference/allocator-tuning/*.json   7 recordings   -> copy to assets/reference/
#   reference/offloading/*.json         4 recordings   -> copy to assets/reference/
#   reference/memory-budget/*.json     11 recordings   -> copy to assets/reference/
#   traces/settings_traces.jsonl.gz     every allocator event of lesson 23's variants
#   traces/h200_allocator_settings_traces.json.gz  -> copy to tests/fixtures/
#   logs/*.txt, done
# Then, on any machine: copy those files in, remove `pending = true` from the three lesson.toml,
# `memlab dev cite`, `memlab dev check` (it names every claim the recordings do not back),
# `pytest tests/unit/test_allocator_settings_traces.py`.
set -u
DIR=${1:?usage: bash bench/h200_new_lessons.sh DIR [23 24 25a 25b traces]...}
shift
STEPS=${*:-23 24 25a 25b traces}
MODE=${MODE:-cuda}
ROOT=$(pwd)
mkdir -p "$DIR/logs" "$DIR/reference" "$DIR/traces"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export MEMLAB_HOME=${MEMLAB_HOME:-$DIR/home}
memlab() { python3 -m lab.cli "$@"; }
say() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$DIR/logs/session.txt"; }

# a saved result counts as done when it measured something (ok, or a lesson's out-of-memory);
# an error, a timeout or a cancelled run is run again
done_ok() {
  [ -f "$1" ] && python3 -c "import json,sys; sys.exit(json.load(open('$1'))['status'] not in ('ok', 'oom'))"
}

# record LESSON-ID NUMBER LOG [--variant V ...]: skipped when every named variant is done
record() {
  local id=$1 key=$2 log=$3; shift 3
  local want=("$@") missing=0 v
  if [ ${#want[@]} -eq 0 ]; then
    mapfile -t want < <(python3 -c "from lab.course.curriculum import load_course
print('\n'.join('--variant\n' + v.name for v in load_course().find('$key').variants))")
  fi
  for v in "${want[@]}"; do
    [ "$v" = "--variant" ] && continue
    done_ok "$DIR/reference/$id/$v.json" || missing=1
  done
  if [ $missing -eq 0 ]; then say "$log: saved already, skipped"; return; fi
  local t0=$SECONDS
  timeout 570 python3 -m lab.cli run "$key" "${want[@]}" --mode "$MODE" --scale seed --exclusive \
    --save "$DIR/reference" > "$DIR/logs/$log.txt" 2>&1
  say "$log: rc=$? in $((SECONDS - t0)) s; $(ls "$DIR/reference/$id" 2>/dev/null | wc -l) results"
}

budget=(--variant baseline --variant autocast_bf16 --variant pure_bf16 --variant master_weights
        --variant lora)
challenges=(--variant fit_16gib_start --variant fit_16gib_solution --variant halve_eval_start
            --variant halve_eval_solution --variant fragmentation_start
            --variant fragmentation_solution)

for step in $STEPS; do
  case $step in
    23) record allocator-tuning 23 run-23 ;;
    24) record offloading 24 run-24 ;;
    25a) record memory-budget 25 run-25-budget "${budget[@]}" ;;
    25b) record memory-budget 25 run-25-challenges "${challenges[@]}" ;;
    traces)
      if [ -f "$DIR/traces/h200_allocator_settings_traces.json.gz" ]; then
        say "traces: recorded already, skipped"
      elif [ "$MODE" = "cuda" ]; then
        t0=$SECONDS
        timeout 300 python3 bench/allocator_settings_traces.py --out "$DIR/traces" --fixture \
          > "$DIR/logs/traces.txt" 2>&1
        rc=$?
        cp tests/fixtures/h200_allocator_settings_traces.json.gz "$DIR/traces/" 2>/dev/null
        say "traces: rc=$rc in $((SECONDS - t0)) s; $(tail -n 8 "$DIR/logs/traces.txt" | tr '\n' '|')"
      else
        timeout 300 python3 bench/allocator_settings_traces.py --out "$DIR/traces" --cpu \
          > "$DIR/logs/traces.txt" 2>&1
        say "traces (dry run, $MODE): rc=$? $(tail -n 1 "$DIR/logs/traces.txt")"
      fi ;;
    *) say "unknown step $step (use 23 24 25a 25b traces)" ;;
  esac
done
python3 -c "from lab.runner import remote; remote.stop_service()" 2>/dev/null
echo ok > "$DIR/done"
say "done: $(find "$DIR/reference" -name '*.json' | wc -l) recordings"
