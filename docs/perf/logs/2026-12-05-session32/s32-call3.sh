#!/usr/bin/env bash
# Session 32, call 3: the 128-token tile's producer not issuing the activation rows past the item's wgmma width
# (build-v, variant-skip-unread-rows.patch on 1842735) against 1842735 (build-k): the variant's GPU tests, then the
# prefill range of TP8, EP8 and the full layer at --block-m 128, alternated twice.
# Carry [".device/bins-s32c3.tgz"]: build-v/fp4moe, build-v/tests/fp4moe_gpu_tests, build-k/fp4moe.
set -uo pipefail
tar xzf .device/bins-s32c3.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
timeout 170 build-v/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $L/gpu-tests.log | head -5
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in v k; do
      timeout 60 build-$b/fp4moe bench "$@" --tokens 2048 3072 4096 16384 --block-m 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens\|timing the layer ([0-9.]* us)' $L/pf-$b-$n-r$r.log | sed 's/: max tokens//; s/timing the layer (\([0-9.]*\) us)/\1 |/' | tr '\n' ' ')"
    done
  done
done
grep -h "^measured" $L/*.log | cut -c1-120 | sort | uniq -c | head -4
cd $OUT && tar czf logs.tgz logs
