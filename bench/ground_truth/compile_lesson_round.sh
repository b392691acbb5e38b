# One device call: lesson 29 (torch-compile) recorded on whichever card comes, with snapshots.
set -u
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ALLOW_CARD=1 LESSON_TIMEOUT=${LESSON_TIMEOUT:-560} SNAPSHOTS=1 bash bench/h200_round.sh "$OUT/r" torch-compile
tail -n 40 "$OUT/r/logs/run-torch-compile.txt"
for f in "$OUT"/r/snapshots/*.pkl; do gzip -9 "$f"; done
ls -la "$OUT/r/snapshots" "$OUT/r/reference/torch-compile" 2>&1
