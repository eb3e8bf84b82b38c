#!/usr/bin/env bash
# Prepared in session 40 for an H200 (not run): the shards' and the full layer's tables at HEAD, which has gate_up's
# tail kernel (the tables in shards.md are cb4a2eb's), with the A/B against cb4a2eb's CLI at the T the tail kernel
# takes, and the same build with --no-gate-up-tail. Here first (done in session 40 at 6adb39a's code; redo if the
# code changed): cp <cb4a2eb's CLI> .device/fp4moe-cb4a2eb, then
#   FP4MOE_SKIP_WHEEL=1 FP4MOE_BASE_BUILD=.device/fp4moe-cb4a2eb scripts/gpu-build
# and run this with carry [".device/gpu.tgz"] (about 9 minutes on an H200; on an H100 the A/B and the tests only).
set -uo pipefail
tar xzf .device/gpu.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base head notail; do
    bin=build-sm90/fp4moe; [ $v = base ] && bin=build-base/fp4moe
    flag=(); [ $v = notail ] && flag=(--no-gate-up-tail)
    for s in tp8 ep8; do
      $bin bench --${s:0:2} 8 --tokens 8 16 24 32 48 64 128 --iters 20 "${flag[@]}" --json $L/$s-$v-$r.json \
        > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
# The shard tests (session 40 strengthened the tail kernel's: tail on and off compared bit for bit; not run yet).
timeout 120 build-sm90/tests/fp4moe_gpu_tests --gtest_filter='MoeShards.*:PlannerGpu.*' > $OUT/gpu-tests.log 2>&1
echo "gpu tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/gpu-tests.log | head
if grep -q H200 $OUT/smi.txt; then
  FP4MOE_SUITE="bench shards" \
  FP4MOE_TOKENS="1 2 8 64 256 512 1024 2048 4096 8192 16384" \
  FP4MOE_SHARD_TOKENS="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" TAIL=2 \
    timeout $((${FP4MOE_CALL_LIMIT:-585} - SECONDS)) scripts/gpu-suite
  echo "suite rc $? at $SECONDS s"
fi
cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
