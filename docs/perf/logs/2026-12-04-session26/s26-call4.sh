#!/usr/bin/env bash
# Session 26 call 4: the direct path on expert-parallel ranks' steps of 3 tokens (16 K groups a down warp, down's room
# for fewer SwiGLU rows than pairs, the rest from L2): build-x4 (the change) against build-x (38f6350), alternated
# twice; GPU tests of build-x4.
set -uo pipefail
. scripts/gpu-env
N=build-x4; B=build-x
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 200 $N/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure' -A6 $L/gpu-tests.log | head -30
run() { local tag=$1; shift; for v in new base; do b=$N; [ $v = base ] && b=$B
  timeout 60 $b/fp4moe bench "$@" --iters 30 > $L/$tag-$v.log 2>&1; echo "$tag-$v rc $? $(scripts/bench-summary $L/$tag-$v.log)"; done; }
for r in 1 2; do
  run ep8-r$r --ep 8 --tokens 1 2 3 4
  run tp8-r$r --tp 8 --tokens 1 2
done
run qwen-ep8 --model qwen3-235b --ep 8 --tokens 2 3 4
run qwen-ep4 --model qwen3-235b --ep 4 --tokens 1 2 3
run glm-ep4 --ep 4 --tokens 1 2 3
run dsv3-ep8 --model deepseek-v3 --ep 8 --tokens 2 3
run kimi-ep8 --model kimi-k2 --ep 8 --tokens 2 3
grep -h "T=3:.*direct decode off" $L/*-new.log | sed 's/.*T=3/T=3/' | cut -c1-400
cd $OUT && tar czf logs.tgz logs
