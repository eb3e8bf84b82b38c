#!/usr/bin/env bash
# Session 26 call 3: (a) the direct decode path for EP shards at T=3, 4 (FP4MOE_EXP_DIRECT_MAX_GROUPS=16 where the
# chunks split down's K over the warps) against the layer's plan, same binary, alternated twice; its GPU tests;
# (b) the sm_120 configs on the H200 and the tuner on both shards, for docs/perf/shards.md.
set -uo pipefail
. scripts/gpu-env
B=build-x2
L=$OUT/logs; mkdir -p $L
X=FP4MOE_EXP_DIRECT_MAX_GROUPS=16
env $X FP4MOE_FUZZ_CASES=30 timeout 150 $B/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests-exp.log 2>&1
echo "gpu tests (exp) rc $? $(tail -3 $L/gpu-tests-exp.log | tr '\n' ' ')"
grep -E 'FAILED|Failure' $L/gpu-tests-exp.log | head -10
for r in 1 2; do
  for v in exp base; do
    E=""; [ $v = exp ] && E=$X
    env $E timeout 60 $B/fp4moe bench --ep 8 --tokens 2 3 4 --iters 30 > $L/ep8-$v-$r.log 2>&1
    echo "ep8-$v$r rc $? $(scripts/bench-summary $L/ep8-$v-$r.log)"
  done
done
for m in deepseek-v3 qwen3-235b kimi-k2; do
  for v in exp base; do
    E=""; [ $v = exp ] && E=$X
    env $E timeout 60 $B/fp4moe bench --model $m --ep 8 --tokens 2 3 4 --iters 30 > $L/$m-ep8-$v.log 2>&1
    echo "$m-ep8-$v rc $? $(scripts/bench-summary $L/$m-ep8-$v.log)"
  done
done
env $X timeout 60 $B/fp4moe bench --tp 8 --tokens 3 4 --iters 30 > $L/tp8-exp.log 2>&1
echo "tp8-exp rc $? $(scripts/bench-summary $L/tp8-exp.log)"
timeout 100 $B/fp4moe bench --tp 8 --kernel-arch 120 --tokens 1 2 8 64 512 2048 > $L/sm120-tp8.log 2>&1
echo "sm120-tp8 rc $? $(scripts/bench-summary $L/sm120-tp8.log)"
timeout 100 $B/fp4moe bench --ep 8 --kernel-arch 120 --tokens 1 2 8 64 512 2048 > $L/sm120-ep8.log 2>&1
echo "sm120-ep8 rc $? $(scripts/bench-summary $L/sm120-ep8.log)"
for s in tp ep; do
  timeout 60 $B/fp4moe tune --$s 8 --budget-s 20 --cache $L/cache.json --json $L/tune-${s}8.json > $L/tune-${s}8.log 2>&1
  echo "tune-${s}8 rc $?"; tail -16 $L/tune-${s}8.log
done
cd $OUT && tar czf logs.tgz logs
