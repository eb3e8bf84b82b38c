#!/usr/bin/env bash
# Session 21 call 1: GPU tests of build-v2 (hoisted epilogue addresses), then base (HEAD 16b50f9's kernels) against v2:
# prefill T=4096, 16384 at bm128 on TP8, EP8 and the full layer (alternated twice), decode T=8 64 512 once.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
pf() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s gu %s down %s layer %s TF %s cuBLAS %s x %s |", $1, $3, $6, $7, $8, $13, $16, $17}' "$1"; }
FP4MOE_FUZZ_CASES=100 timeout 200 build-v2/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in base v2; do
      timeout 90 build-$b/fp4moe bench "$@" --tokens 4096 16384 --block-m 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
      echo "pf $b $n r$r rc $? $(pf $L/pf-$b-$n-r$r.log)"
    done
  done
done
for s in "tp8 --tp 8" "full"; do
  set -- $s; n=$1; shift
  for b in base v2; do
    timeout 80 build-$b/fp4moe bench "$@" --tokens 8 64 512 --iters 20 > $L/dec-$b-$n.log 2>&1
    echo "dec $b $n rc $? $(scripts/bench-summary $L/dec-$b-$n.log)"
  done
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
