#!/usr/bin/env bash
# Session 27 call 4: build-n (the direct down kernels' finalize reading 8 slots' rows, then their terms, before adding;
# the finalize kernel reading its first rows of the permutation before its wait) against build-h (0f564f6),
# alternated three times; GPU tests of build-n.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 240 build-n/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$SECONDS"
grep -E 'FAILED|Failure' -A6 $L/gpu-tests.log | head -30
run() { local tag=$1 builds=$2; shift 2; for v in $builds; do
  timeout 120 build-$v/fp4moe bench "$@" --iters 20 > $L/$tag-$v.log 2>&1; echo "$tag-$v rc $? t=$SECONDS $(scripts/bench-summary $L/$tag-$v.log | cut -c1-180)"; done; }
for r in 1 2 3; do
  run tp8-r$r "h n" --tp 8 --tokens 1 2 3 4 8 16 64 512
  run ep8-r$r "h n" --ep 8 --tokens 1 2 3 4 8 16 64 512
  [ $SECONDS -lt 420 ] && run full-r$r "h n" --tokens 1 8 64 512
done
[ $SECONDS -lt 480 ] && run tp8pf-r1 "h n" --tp 8 --tokens 2048 4096 --block-m 64 128 --no-graph
cd $OUT && tar czf logs.tgz logs
