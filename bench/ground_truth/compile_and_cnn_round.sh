# One device call, most important first: lesson 29 (torch-compile) recorded with snapshots, then
# as much of the CNN workspace probe as the call's time leaves (bench/ground_truth/conv_workspace.py).
set -u
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
LIMIT=${LIMIT:-580}
ALLOW_CARD=1 LESSON_TIMEOUT=${LESSON_TIMEOUT:-400} SNAPSHOTS=1 bash bench/h200_round.sh "$OUT/r" torch-compile
tail -n 30 "$OUT/r/logs/run-torch-compile.txt"
for f in "$OUT"/r/snapshots/*.pkl; do [ -f "$f" ] && gzip -9 "$f"; done
ls -la "$OUT/r/snapshots" 2>&1 | tail -n 6
cd bench/ground_truth
trace() {  # BENCHMARK SCRIPT ARGS...
  local left=$((LIMIT - SECONDS))
  [ $left -lt 40 ] && { echo "no time for $*"; return; }
  timeout $((left - 10)) python conv_workspace.py trace --benchmark "$@" 2>&1 | grep -E "CONV_TRACE|Error" >> "$OUT/traces.txt"
  echo "trace $* done at $SECONDS s"
}
trace script zoo/resnet.py --depth 50 --batch 128
trace off zoo/resnet.py --depth 50 --batch 128
trace script zoo/resnet.py --depth 101 --batch 64 --channels-last
trace off zoo/resnet.py --depth 101 --batch 64 --channels-last
trace script zoo/unet.py --batch 16 --image 512 --bf16
trace off zoo/unet.py --batch 16 --image 512 --bf16
left=$((LIMIT - SECONDS))
[ $left -gt 60 ] && timeout $((left - 10)) python conv_workspace.py table --out "$OUT/conv_table.json" > "$OUT/table.txt" 2>&1
echo "end at $SECONDS s"
