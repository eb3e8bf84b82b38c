#!/usr/bin/env bash
# Session 22 call 4: the column-slice down kernel with several chunks per stage, two variants: build-c4 (the K warps'
# products meet in warp 0 through scratch) and build-c5 (an accumulator per K warp); their GPU tests, all GPU tests of
# c5, TP8 decode with each and without (--no-column-down), alternated twice.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
for b in c4 c5; do
  timeout 90 build-$b/fp4moe_gpu_tests --gtest_brief=1 --gtest_filter='*ColumnDown*' > $L/gpu-tests-columns-$b.log 2>&1
  echo "$b column tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests-columns-$b.log | tr '\n' ' ')"
  grep -E 'Failure|Expected|Which is|Actual|trace:|test_moe_shards' $L/gpu-tests-columns-$b.log | head -12
done
FP4MOE_FUZZ_CASES=100 timeout 200 build-c5/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests-c5.log 2>&1
echo "c5 gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests-c5.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $L/gpu-tests-c5.log | head -20
for r in 1 2; do
  for b in c4 c5; do
    timeout 100 build-$b/fp4moe bench --tp 8 --tokens 1 8 16 32 64 128 256 512 --iters 30 > $L/tp8-$b-$r.log 2>&1
    echo "$b-$r rc $? $(scripts/bench-summary $L/tp8-$b-$r.log)"
    grep -o "T=[0-9]*: max tokens on one expert [0-9]*; layer us by block_m: [^(]*" $L/tp8-$b-$r.log | cut -c1-110
  done
  timeout 100 build-c5/fp4moe bench --tp 8 --tokens 1 8 16 32 64 128 256 512 --iters 30 --no-column-down > $L/tp8-tiled-$r.log 2>&1
  echo "tiled-$r rc $? $(scripts/bench-summary $L/tp8-tiled-$r.log)"
done
cd $OUT && tar czf logs.tgz logs
