#!/usr/bin/env bash
# Session 21 call 5: GPU tests of build-final (3ceac52's kernels, SASS identical to call 1's build-v2), the current shard and
# full-layer decode tables (T=1 2 8 64 512), and 16b50f9's kernels (build-base) at T=8 64 in the same call.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
FP4MOE_FUZZ_CASES=100 timeout 200 build-final/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
  set -- $s; n=$1; shift
  timeout 150 build-final/fp4moe bench "$@" --tokens 1 2 8 64 512 --iters 30 > $L/table-$n.log 2>&1
  echo "final rc $? $(scripts/bench-summary $L/table-$n.log)"
  timeout 100 build-base/fp4moe bench "$@" --tokens 8 64 --iters 30 > $L/base-$n.log 2>&1
  echo "base rc $? $(scripts/bench-summary $L/base-$n.log)"
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
