#!/usr/bin/env bash
# Session 27 call 2: build-p (the alpha change + the direct gate_up prefetching down's weights into L2) against
# build-m (the alpha change alone) and build-b (544a9a4), alternated; GPU tests of build-p.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 240 build-p/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$SECONDS"
grep -E 'FAILED|Failure' -A6 $L/gpu-tests.log | head -30
run() { local tag=$1 builds=$2; shift 2; for v in $builds; do
  timeout 90 build-$v/fp4moe bench "$@" --iters 20 > $L/$tag-$v.log 2>&1; echo "$tag-$v rc $? t=$SECONDS $(scripts/bench-summary $L/$tag-$v.log | cut -c1-200)"; done; }
for r in 1 2 3; do
  run tp8d-r$r "b m p" --tp 8 --tokens 1 2
  run ep8d-r$r "b m p" --ep 8 --tokens 1 2 3
done
run qwtp8-r1 "m p" --model qwen3-235b --tp 8 --tokens 1 2
run qwep8-r1 "m p" --model qwen3-235b --ep 8 --tokens 1 2 3
for r in 1 2; do
  [ $SECONDS -lt 450 ] && run full-r$r "b m" --tokens 1 8 64 512
  [ $SECONDS -lt 450 ] && run tp8-r$r "b m" --tp 8 --tokens 4 8 64 512
  [ $SECONDS -lt 450 ] && run ep8-r$r "b m" --ep 8 --tokens 4 8 64 512
done
cd $OUT && tar czf logs.tgz logs
