#!/usr/bin/env bash
# Session 19 call 6: GPU tests of the final build (386b733 + the sm_120 fused-routing cases), the current shard
# and full-layer tables (T=1 2 8 64 512), and c89c492 (build-cur) at T=4 8 in the same call as the baseline.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
FP4MOE_FUZZ_CASES=100 timeout 240 build-new/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
  set -- $s; n=$1; shift
  timeout 150 build-new/fp4moe bench "$@" --tokens 1 2 8 64 512 --iters 30 > $L/table-$n.log 2>&1
  echo "new $n rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/table-$n.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s %s/%s %s", $1, $3, $8, $9, $12}' $L/table-$n.log)"
  timeout 100 build-cur/fp4moe bench "$@" --tokens 4 8 --block-m 8 --iters 30 > $L/base-$n.log 2>&1
  echo "cur $n rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/base-$n.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s %s/%s %s", $1, $3, $8, $9, $12}' $L/base-$n.log)"
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
