#!/usr/bin/env bash
# Session 32, call 1: the 128-token tile's items at every wgmma width that is a multiple of 16 (build-sm90, this
# session's change) against 16, 32, 64 and 128 only (build-h, bce5f5e): the GPU tests of the change, then the prefill
# range on TP8, EP8 and the full layer at --block-m 64 128, alternated twice.
# Carry [".device/bins-s32.tgz"]: build-sm90/fp4moe, build-sm90/tests/fp4moe_gpu_tests, build-h/fp4moe.
set -uo pipefail
tar xzf .device/bins-s32.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
timeout 170 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $L/gpu-tests.log | head -5
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in sm90 h; do
      timeout 75 build-$b/fp4moe bench "$@" --tokens 1024 2048 3072 4096 16384 --block-m 64 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens.*layer us by block_m: bm64 [0-9]* bm128 [0-9]* (the layer picks [0-9]*)\|timing the layer ([0-9.]* us)' $L/pf-$b-$n-r$r.log | sed 's/: max tokens on one expert [0-9]*; layer us by block_m://; s/(the layer picks \([0-9]*\))/pick \1/; s/timing the layer (\([0-9.]*\) us)/med \1 |/' | tr '\n' ' ')"
    done
  done
done
grep -h "^measured\|read probe\|cuBLAS bf16 8192" $L/*.log | cut -c1-120 | sort | uniq -c | head -8
cd $OUT && tar czf logs.tgz logs
