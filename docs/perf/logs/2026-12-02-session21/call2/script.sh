#!/usr/bin/env bash
# Session 21 call 2: GPU tests of build-v3 (staggered consumer halves for items of fewer stages than the ring), then
# v2 (3ceac52's kernels) against v3: TP8 prefill T=2048 4096 16384 at bm128 twice, TP8 decode T=16 32 64 512, EP8 and
# full prefill once (no stagger there: K = 2048).
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
pf() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s gu %s down %s layer %s TF %s cuBLAS %s x %s |", $1, $3, $6, $7, $8, $13, $16, $17}' "$1"; }
FP4MOE_FUZZ_CASES=100 timeout 200 build-v3/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for r in 1 2; do
  for b in v2 v3; do
    timeout 90 build-$b/fp4moe bench --tp 8 --tokens 2048 4096 16384 --block-m 128 --no-graph --iters 5 > $L/pf-$b-tp8-r$r.log 2>&1
    echo "pf $b tp8 r$r rc $? $(pf $L/pf-$b-tp8-r$r.log)"
  done
done
for r in 1 2; do
  for b in v2 v3; do
    timeout 90 build-$b/fp4moe bench --tp 8 --tokens 16 32 64 512 --iters 20 > $L/dec-$b-tp8-r$r.log 2>&1
    echo "dec $b tp8 r$r rc $? $(scripts/bench-summary $L/dec-$b-tp8-r$r.log)"
  done
done
for s in "ep8 --ep 8" "full"; do
  set -- $s; n=$1; shift
  for b in v2 v3; do
    timeout 90 build-$b/fp4moe bench "$@" --tokens 4096 --block-m 128 --no-graph --iters 5 > $L/pf-$b-$n.log 2>&1
    echo "pf $b $n rc $? $(pf $L/pf-$b-$n.log)"
  done
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
