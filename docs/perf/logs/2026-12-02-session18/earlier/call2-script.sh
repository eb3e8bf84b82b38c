#!/usr/bin/env bash
# Session 18 call 2: GPU tests on the first-kernel PDL change (build-s18), then A/B against fd103ed's kernels
# (build-chain0: same bench, kernels before the change), alternated twice: TP8 / EP8 / full at T=1 2 8 64 512.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
t0=$(date +%s)
FP4MOE_FUZZ_CASES=100 timeout 200 build-s18/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1; rc=$?
echo "gpu-tests rc $rc $(( $(date +%s) - t0 )) s"; tail -3 $L/gpu-tests.log; grep -B5 "FAILED  \]" $L/gpu-tests.log | head -30
[ $rc -eq 0 ] || { cd $OUT && tar czf logs.tgz logs; exit 0; }
for round in 1 2; do
  for v in chain0 s18; do
    for sh in "--tp 8" "--ep 8" ""; do n=$(echo "x$sh" | tr -d ' -')
      timeout 60 build-$v/fp4moe bench $sh --tokens 1 2 8 64 512 > $L/ab-$v-$n-$round.log 2>&1; echo "$v $n r$round rc $?"
      grep -o "T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass" $L/ab-$v-$n-$round.log | sed 's/: max tokens.*;/:/' | tr '\n' ' '; echo
      awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-$n-$round.log; echo
    done
  done
done
grep -h "measured:" $L/ab-*.log | sort | uniq -c | head
cd $OUT && tar czf logs.tgz logs
