#!/usr/bin/env bash
# Session 18 review call: GPU tests on HEAD's kernels (build-s18f), the shards' decode bench and the unsharded
# decode (read probe and cuBLAS in the same runs), and the prefill full layer against fd103ed's kernels (build-chain0),
# alternated twice.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
t0=$(date +%s)
FP4MOE_FUZZ_CASES=100 timeout 200 build-s18f/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1; rc=$?
echo "gpu-tests rc $rc $(( $(date +%s) - t0 )) s"; tail -3 $L/gpu-tests.log; grep -B5 "FAILED  \]" $L/gpu-tests.log | head -20
for sh in "--tp 8" "--ep 8" "--full"; do n=$(echo $sh | tr -d ' -'); a=$sh; [ "$n" = full ] && a=""
  timeout 90 build-s18f/fp4moe bench $a --tokens 1 2 8 64 512 > $L/bench-$n.log 2>&1; echo "bench $n rc $?"
  grep "measured:" $L/bench-$n.log
  awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "  T%s bm%s layer %s graph %s %%BW %s cuBLAS %s\n", $1, $3, $8, $9, $12, $16}' $L/bench-$n.log
  grep -o "T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass" $L/bench-$n.log | sed 's/: max tokens.*;/:/'
done
for round in 1 2; do for v in chain0 s18f; do
  timeout 100 build-$v/fp4moe bench --tokens 2048 16384 --block-m 128 --no-graph --iters 5 > $L/prefill-$v-$round.log 2>&1; echo "prefill $v r$round rc $?"
  awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "  T%s bm%s layer %s cuBLAS %s\n", $1, $3, $8, $16}' $L/prefill-$v-$round.log
done; done
cd $OUT && tar czf logs.tgz logs
