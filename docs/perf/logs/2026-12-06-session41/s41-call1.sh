#!/usr/bin/env bash
# Session 41, call 1: HEAD's shard GPU tests (the tail kernel's test as strengthened after session 40's review: tail
# on and off compared bit for bit; not run before), then an A/B of gate_up's tail kernel at T=16..64 on both GLM-5
# shards: HEAD (build-sm90, .device/gpu.tgz), HEAD with --no-gate-up-tail, and HEAD with only block 0 of the tail
# kernel waiting for the whole-tile kernel (variant-tail-block0-wait.patch of session 40; build-b0/fp4moe in
# .device/b0.tgz), alternated twice, the 8-token tile (the layer's pick at these T); then, on an H200, the shard
# tables (fp4moe bench --tp 8 / --ep 8 --markdown at the layer's own pick) with the time left.
# carry [".device/gpu.tgz", ".device/b0.tgz"].
set -uo pipefail
for a in .device/gpu.tgz .device/b0.tgz; do tar xzf $a; done
. scripts/gpu-env
LIMIT=${FP4MOE_CALL_LIMIT:-580}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
timeout 150 build-sm90/tests/fp4moe_gpu_tests --gtest_filter='MoeShards.*:PlannerGpu.*:MoeDirect.*' > $OUT/gpu-tests.log 2>&1
echo "tests rc $? [$SECONDS s]"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests.log | head -20
grep -A2 "RUN.*GateUpTailPieces" $OUT/gpu-tests.log | head -6
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in tl tlno b0; do
    bin=build-sm90/fp4moe; [ $v = b0 ] && bin=build-b0/fp4moe
    flag=(); [ $v = tlno ] && flag=(--no-gate-up-tail)
    for s in tp8 ep8; do
      a="--tp 8"; [ $s = ep8 ] && a="--ep 8"
      FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens 16 24 32 48 64 --block-m 8 --iters 20 "${flag[@]}" \
        --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$s-$v-$r $(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
if grep -q H200 $OUT/smi.txt; then
  for s in tp8 ep8; do
    a="--tp 8"; [ $s = ep8 ] && a="--ep 8"
    left=$(( LIMIT - SECONDS )); [ $left -gt 40 ] || break
    timeout $left build-sm90/fp4moe bench $a --tokens 1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 \
      --json $OUT/bench-$s.json --markdown $OUT/bench-$s.md > $OUT/bench-$s.log 2>&1
    echo "bench $s rc $? [$SECONDS s]"
  done
fi
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
