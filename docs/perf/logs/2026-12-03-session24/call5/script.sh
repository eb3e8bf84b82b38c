#!/usr/bin/env bash
# Session 24 call 5: GPU tests of the direct gate_up whose chunk loop also speculates on its row's pair
# (build-spec2), then A/B against 79402b5 (build-spec) at the direct path's T, alternated twice.
set -uo pipefail
N=${1:?usage: s24-call4.sh NEW BASE}
B=${2:?}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
FP4MOE_FUZZ_CASES=100 timeout 200 $N/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure' $L/gpu-tests.log | head -10
for r in 1 2; do
  for v in spec base; do
    b=$N; [ $v = base ] && b=$B
    timeout 60 $b/fp4moe bench --tp 8 --tokens 1 2 4 --iters 50 > $L/tp8-$v-$r.log 2>&1
    echo "tp8-$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
    timeout 60 $b/fp4moe bench --ep 8 --tokens 1 2 --iters 50 > $L/ep8-$v-$r.log 2>&1
    echo "ep8-$v$r rc $? $(scripts/bench-summary $L/ep8-$v-$r.log)"
    timeout 60 $b/fp4moe bench --shape 256,7168,256,8 --tokens 1 2 --iters 50 > $L/ds-tp8-$v-$r.log 2>&1
    echo "ds-tp8-$v$r rc $? $(scripts/bench-summary $L/ds-tp8-$v-$r.log)"
  done
done
cd $OUT && tar czf logs.tgz logs
