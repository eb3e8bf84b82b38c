#!/usr/bin/env bash
# Session 37 call 1: the grouped GEMMs' tail prefetch (the blocks with an item fewer than the grid's last, partial
# round request that round's weights into L2 once their own copies are issued), three forms against 9884598's CLI
# (build-base/fp4moe), alternated twice: v50-0 (build-sm90: tails of at most half the grid, whole K range), v100-0
# (every tail), v50-50 (half the grid, the second half of each item's K). Both shards at T=8..512 and the full layer
# at T=8, 64, 512 (chain per pass at the layer's own pick); then the GPU and unit tests of build-sm90.
# Here first: FP4MOE_SKIP_WHEEL=1 FP4MOE_BASE_BUILD=.device/fp4moe-9884598 scripts/gpu-build, the variants' CLIs in
# .device/fp4moe-v100-0 and .device/fp4moe-v50-50; carry [".device/gpu.tgz", ".device/fp4moe-v100-0", ".device/fp4moe-v50-50"].
set -uo pipefail
tar xzf .device/gpu.tgz
. scripts/gpu-env
L=$OUT/ab; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
declare -A BIN=([base]=build-base/fp4moe [v50-0]=build-sm90/fp4moe [v100-0]=.device/fp4moe-v100-0 [v50-50]=.device/fp4moe-v50-50)
LIMIT=${FP4MOE_CALL_LIMIT:-585}
for round in 1 2; do
  for shape in tp8 ep8 full; do
    case $shape in tp8) a=(--tp 8); t="8 16 32 64 128 512";; ep8) a=(--ep 8); t="8 16 32 64 128 512";; full) a=(); t="8 64 512";; esac
    order="base v50-0 v100-0 v50-50"; [ $round = 2 ] && order="v50-50 v100-0 v50-0 base"
    for v in $order; do
      [ $SECONDS -gt $((LIMIT - 150)) ] && break 3
      ${BIN[$v]} bench "${a[@]}" --tokens $t --iters 20 > $L/$shape-$v-$round.log 2>&1
      echo "$(scripts/bench-summary $L/$shape-$v-$round.log | cut -c1-200) [$SECONDS s]"
    done
  done
done
echo "=== tests at $SECONDS s"
timeout $((LIMIT - SECONDS - 10)) build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu-tests rc $?"
tail -5 $L/gpu-tests.log
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
