#!/usr/bin/env bash
# Session 18 call 8: the routing's id and weight loads as CTA-scope strong loads (build-fc) against the GPU-scope ones
# of call 7 (build-f) and 6b85d85 (build-s18c), alternated twice on both shards at T=1 2 8 64 512; GPU tests of
# build-fc first, then the full layer on build-fc.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
FP4MOE_FUZZ_CASES=100 timeout 200 build-fc/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests-fc.log 2>&1; echo "gpu-tests rc $?"; tail -3 $L/gpu-tests-fc.log
for round in 1 2; do
  for v in s18c f fc; do
    for sh in "--tp 8" "--ep 8"; do n=$(echo "x$sh" | tr -d ' -')
      timeout 60 build-$v/fp4moe bench $sh --tokens 1 2 8 64 512 --iters 30 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
timeout 90 build-fc/fp4moe bench --tokens 1 2 8 64 512 > $L/bench-fc-full.log 2>&1; echo "full rc $?"
grep "measured:" $L/bench-fc-full.log
awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "  T%s bm%s layer %s graph %s %%BW %s cuBLAS %s\n", $1, $3, $8, $9, $12, $16}' $L/bench-fc-full.log
grep -o "T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass" $L/bench-fc-full.log | sed 's/: max tokens.*;/:/'
cd $OUT && tar czf logs.tgz logs
