#!/usr/bin/env bash
# Session 19 call 3 (call 2 again on the bitonic routing): GPU tests of build-new (routing of up to 64 pairs inside the GEMMs), then an A/B against
# build-cur (c89c492) alternated twice: TP8 and EP8 at T=4 5 8, the full layer at T=1 4 8.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
FP4MOE_FUZZ_CASES=100 timeout 240 build-new/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for round in 1 2; do
  for v in cur new; do
    for s in "tp8 --tp 8 --tokens 4 5 8" "ep8 --ep 8 --tokens 4 5 8" "full --tokens 1 4 8"; do
      set -- $s; n=$1; shift
      timeout 100 build-$v/fp4moe bench "$@" --iters 30 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
grep -h "measured:" $L/ab-*.log | cut -c1-80 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
