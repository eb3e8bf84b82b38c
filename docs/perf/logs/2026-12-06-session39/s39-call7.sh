#!/usr/bin/env bash
# Session 39 call 7: a warp-specialized 8-token tile (a producer warpgroup and mbarriers instead of a block barrier each
# stage, wgmma m64n8k16; catalogue entry {kWarpSpecialized, 8, 256, 128} under FP4MOE_EXP_WS8, build-ws8): the layer
# takes it for block_m 8 wherever it does not route pairs itself (more than 32 pairs). One binary, A/B by the bench's
# --no-warp-specialized (the multistage kernels), alternated twice, at block_m 8; then the layer's GPU tests of the
# build (MoeGpu.*:MoeShards.*). carry [".device/ws8.tgz"].
set -uo pipefail
tar xzf .device/ws8.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in ws ms; do
    o=""; [ $v = ms ] && o="--no-warp-specialized"
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="8 16 32 64 128";; ep8) a="--ep 8"; t="8 16 32 64 128";; full) a=""; t="8 64";; esac
      FP4MOE_PRINT_PLANS=1 build-ws8/fp4moe bench $a --tokens $t --block-m 8 $o --iters 20 > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
timeout 150 build-ws8/tests/fp4moe_gpu_tests --gtest_filter='MoeGpu.*:MoeShards.*' > $OUT/gpu-tests-ws8.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/gpu-tests-ws8.log | head -12
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
