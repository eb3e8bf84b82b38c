#!/usr/bin/env bash
# Session 24 call 3 (experiment): the split down kernel (FP4MOE_DOWN_SPLIT=1: a block's (chunk, K piece) units spread
# evenly over its warps, for up to 64 pairs and any I) against the ring kernel (default) and the tiled kernels
# (--no-direct-decode), TP8 / EP8 / full layer at T=3..8; GPU tests with the split kernel planned.
set -uo pipefail
B=${1:?usage: s24-call3.sh BUILD}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
FP4MOE_DOWN_SPLIT=1 FP4MOE_FUZZ_CASES=100 timeout 200 $B/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests-split.log 2>&1
echo "gpu tests (split) rc $? $(tail -3 $L/gpu-tests-split.log | tr '\n' ' ')"
grep -E 'FAILED|Failure|differ' $L/gpu-tests-split.log | sort | uniq -c | head -20
run() {  # name, env, args...
  local n=$1 e=$2; shift 2
  env $e timeout 100 $B/fp4moe bench "$@" --iters 30 > $L/$n.log 2>&1
  echo "$n rc $? $(scripts/bench-summary $L/$n.log)"
}
for r in 1 2; do
  run tp8-ring-$r X=1 --tp 8 --tokens 4 5 6 7 8
  run tp8-split-$r FP4MOE_DOWN_SPLIT=1 --tp 8 --tokens 4 5 6 7 8
  run tp8-tiled-$r X=1 --tp 8 --tokens 4 5 6 7 8 --no-direct-decode
done
run tp8-nocl-split FP4MOE_DOWN_SPLIT=1 --tp 8 --tokens 3 5 --no-cluster-decode
run tp8-nocl-ring X=1 --tp 8 --tokens 3 5 --no-cluster-decode
for r in 1 2; do
  run ep8-split-$r FP4MOE_DOWN_SPLIT=1 --ep 8 --tokens 3 4 6 8
  run ep8-tiled-$r X=1 --ep 8 --tokens 3 4 6 8
done
run full-split FP4MOE_DOWN_SPLIT=1 --tokens 1 2 4 8
run full-tiled X=1 --tokens 1 2 4 8
cd $OUT && tar czf logs.tgz logs
