# One device call (issue 37's open question, the CNN cases' reserved memory): the allocator's
# whole history of each zoo CNN script, cudnn.benchmark as written and pinned off, kept as
# gzipped pickles directly in $OUT (files deeper than three folders, or more than eight per call,
# do not come back). Then, on this machine: python bench/cnn_trace_replay.py OUT/*.pkl.gz --sim
#
#   run: bash bench/ground_truth/cnn_traces_round.sh        (about 4 minutes on an H100)
#   some: ONLY="r50-fp32-on unet-bf16-off" LIMIT=300 bash bench/ground_truth/cnn_traces_round.sh
set -u
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
LIMIT=${LIMIT:-580}
cd bench/ground_truth
trace() {  # NAME BENCHMARK [--stacks all] SCRIPT ARGS...
  local name=$1; shift
  [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]] && return  # ONLY="r50-fp32-on ...": these
  local stacks=python; [ "$2" = --stacks ] && { stacks=$3; set -- "$1" "${@:4}"; }
  local left=$((LIMIT - SECONDS))
  [ $left -lt 40 ] && { echo "no time for $name"; return; }
  timeout $((left - 10)) python conv_workspace.py trace --benchmark "$1" --stacks $stacks \
      --save "$OUT/$name.pkl.gz" -- "${@:2}" 2>&1 | grep -E "CONV_TRACE|Error" >> "$OUT/traces.txt"
  echo "$name done at $SECONDS s"
}
trace r50-fp32-on script zoo/resnet.py --depth 50 --batch 128
trace r101-fp32-cl-on script zoo/resnet.py --depth 101 --batch 64 --channels-last
trace unet-bf16-on script zoo/unet.py --batch 16 --image 512 --bf16
trace r50-bf16-cl-on script zoo/resnet.py --depth 50 --batch 128 --bf16 --channels-last
trace unet-bf16-off off zoo/unet.py --batch 16 --image 512 --bf16
trace r50-fp32-off off zoo/resnet.py --depth 50 --batch 128
# last, as C++ stacks are slow to take: they name the ATen function behind each large block
trace r50-fp32-cpp script --stacks all zoo/resnet.py --depth 50 --batch 128
ls -la "$OUT"
echo "end at $SECONDS s"
