#!/usr/bin/env bash
# Session 27 call 1: the epilogues' alpha (and, multistage down without fused routing, the row weights) read as an
# item starts instead of after its last MMA: build-m (the change) against build-b (544a9a4), alternated twice; GPU
# tests of build-m.
set -uo pipefail
. scripts/gpu-env
N=build-m; B=build-b
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 240 $N/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$SECONDS"
grep -E 'FAILED|Failure' -A6 $L/gpu-tests.log | head -30
run() { local tag=$1; shift; for v in new base; do b=$N; [ $v = base ] && b=$B
  timeout 90 $b/fp4moe bench "$@" --iters 20 > $L/$tag-$v.log 2>&1; echo "$tag-$v rc $? t=$SECONDS $(scripts/bench-summary $L/$tag-$v.log)"; done; }
for r in 1 2; do
  [ $SECONDS -lt 470 ] && run tp8-r$r --tp 8 --tokens 1 2 4 8 16 64 512
  [ $SECONDS -lt 470 ] && run ep8-r$r --ep 8 --tokens 1 2 3 4 8 16 64 512
done
[ $SECONDS -lt 500 ] && run full-r1 --tokens 1 8 64 512
cd $OUT && tar czf logs.tgz logs
