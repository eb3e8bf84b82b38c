#!/usr/bin/env bash
# Session 19 call 10: GPU tests of build-tail (gate_up's tail split), then an A/B against build-new (386b733's
# kernels) alternated twice: TP8 and EP8 at T=8 16 32 64, the full layer at T=1 8 11 16 32 64 512.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
FP4MOE_FUZZ_CASES=100 timeout 240 build-tail/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' -A3 $L/gpu-tests.log | head -30
for round in 1 2; do
  for v in new tail; do
    for s in "tp8 --tp 8 --tokens 8 16 32 64" "ep8 --ep 8 --tokens 8 16 32 64" "full --tokens 1 8 11 16 32 64 512"; do
      set -- $s; n=$1; shift
      timeout 150 build-$v/fp4moe bench "$@" --iters 30 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s %s/%s", $1, $3, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
grep -h "measured:" $L/ab-*.log | cut -c1-60 | sort | uniq -c
grep -ho 'gate_up K not split (the layer splits it in [0-9]*) [0-9.]* us ([-+0-9.]*%)' $L/ab-tail-*-1.log | head -20
cd $OUT && tar czf logs.tgz logs
