#!/usr/bin/env bash
# Session 22 calls 1 and 2 (`.device/decode-ab.sh build-c1`, then `build-c2`: the kernel's first and second versions):
# GPU tests of that build (the column-slice down kernel), then the TP8 decode range with the kernel (default) and
# without it (--no-column-down), alternated twice, and the plans it prints.
set -uo pipefail
B=${1:?usage: decode-ab.sh BUILD_DIR}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
timeout 60 $B/fp4moe_gpu_tests --gtest_brief=1 --gtest_filter='*ColumnDown*' > $L/gpu-tests-columns.log 2>&1
echo "column tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests-columns.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|error|Expected|Which is' $L/gpu-tests-columns.log | head -30
FP4MOE_FUZZ_CASES=100 timeout 200 $B/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
for r in 1 2; do
  timeout 120 $B/fp4moe bench --tp 8 --tokens 1 8 16 32 64 128 256 512 --iters 30 > $L/tp8-col-$r.log 2>&1
  echo "col$r rc $? $(scripts/bench-summary $L/tp8-col-$r.log)"
  timeout 120 $B/fp4moe bench --tp 8 --tokens 1 8 16 32 64 128 256 512 --iters 30 --no-column-down > $L/tp8-tiled-$r.log 2>&1
  echo "tiled$r rc $? $(scripts/bench-summary $L/tp8-tiled-$r.log)"
done
FP4MOE_PRINT_PLANS=1 timeout 60 $B/fp4moe bench --tp 8 --tokens 8 64 512 --iters 5 --no-graph 2>&1 | grep "fp4moe: MoeLayer" | cut -c1-400 > $L/plans.log
cat $L/plans.log | cut -c1-300
cd $OUT && tar czf logs.tgz logs
