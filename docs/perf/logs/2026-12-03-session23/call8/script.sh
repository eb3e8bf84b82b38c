#!/usr/bin/env bash
# Session 23 call 8 (after the review mend 2e656e8; its kernels' SASS is b634328's): GPU tests of build-rv, then TP8
# T=3, 5, 8 with the cluster decode kernel (default) and without it (--no-cluster-decode), alternated twice.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
FP4MOE_FUZZ_CASES=100 timeout 240 build-rv/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $L/gpu-tests.log | head
for r in 1 2; do
  for v in cluster tiled; do
    f=""; [ $v = tiled ] && f=--no-cluster-decode
    timeout 60 build-rv/fp4moe bench --tp 8 --tokens 3 5 8 --iters 30 $f > $L/tp8-$v-$r.log 2>&1
    echo "$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
  done
done
cd $OUT && tar czf logs.tgz logs
