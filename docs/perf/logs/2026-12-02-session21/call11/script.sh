#!/usr/bin/env bash
# Session 21 call 11: the review mend (accumulators cleared by the multistage caller, the SwiGLU pointer advanced in the
# loop body; all 153 sm_90a kernels' SASS identical to build-final): its GPU tests, then build-mend against 16b50f9's
# kernels (build-base) in the same run: TP8 decode T=1 8 64 512 and TP8 prefill T=4096 16384 at bm128.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
pf() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s gu %s down %s layer %s cuBLAS %s x %s |", $1, $3, $6, $7, $8, $16, $17}' "$1"; }
FP4MOE_FUZZ_CASES=100 timeout 200 build-mend/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for b in mend base; do
  timeout 90 build-$b/fp4moe bench --tp 8 --tokens 1 8 64 512 --iters 30 > $L/dec-$b-tp8.log 2>&1
  echo "dec $b tp8 rc $? $(scripts/bench-summary $L/dec-$b-tp8.log)"
  timeout 90 build-$b/fp4moe bench --tp 8 --tokens 4096 16384 --block-m 128 --no-graph --iters 5 > $L/pf-$b-tp8.log 2>&1
  echo "pf $b tp8 rc $? $(pf $L/pf-$b-tp8.log)"
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
