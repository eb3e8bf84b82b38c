#!/usr/bin/env bash
# Session 26 call 7: the direct kernels' shared-memory limit per arch (two blocks an SM on sm_90: 115,712 B), which
# takes GLM-5's EP8 rank at T=4 to the direct path: build-x7 against 38f6350 (build-x), alternated twice; GLM-4.5's
# EP8 rank (direct at T=3, 4 since f49160b) once; GPU tests of build-x7.
set -uo pipefail
. scripts/gpu-env
N=build-x7; B=build-x
L=$OUT/logs; mkdir -p $L
FP4MOE_FUZZ_CASES=100 timeout 200 $N/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure|note:' -A6 $L/gpu-tests.log | head -20
run() { local tag=$1; shift; for v in new base; do b=$N; [ $v = base ] && b=$B
  timeout 60 $b/fp4moe bench "$@" --iters 30 > $L/$tag-$v.log 2>&1; echo "$tag-$v rc $? $(scripts/bench-summary $L/$tag-$v.log)"; done; }
for r in 1 2; do run ep8-r$r --ep 8 --tokens 1 2 3 4 5; done
run tp8 --tp 8 --tokens 1 2 4
run glm45-ep8 --model glm4.5 --ep 8 --tokens 2 3 4
run qwen-ep8 --model qwen3-235b --ep 8 --tokens 3 4
cd $OUT && tar czf logs.tgz logs
