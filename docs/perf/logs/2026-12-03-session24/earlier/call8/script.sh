#!/usr/bin/env bash
# Session 24 call 8: the chunk loop giving the rest of the chunks to rows without one first (build-bal) against
# 02a32a8 (build-mend): GPU tests, then TP8 T=1..4 and EP8 T=1, 2, alternated twice.
set -uo pipefail
N=${1:?usage: s24-call7.sh NEW BASE}
B=${2:?}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
FP4MOE_FUZZ_CASES=100 timeout 200 $N/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure' $L/gpu-tests.log | head -10
for r in 1 2; do
  for v in bal mend; do
    b=$N; [ $v = mend ] && b=$B
    timeout 60 $b/fp4moe bench --tp 8 --tokens 1 2 4 --iters 30 > $L/tp8-$v-$r.log 2>&1
    echo "tp8-$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
    timeout 60 $b/fp4moe bench --ep 8 --tokens 1 2 --iters 30 > $L/ep8-$v-$r.log 2>&1
    echo "ep8-$v$r rc $? $(scripts/bench-summary $L/ep8-$v-$r.log)"
  done
done
cd $OUT && tar czf logs.tgz logs
