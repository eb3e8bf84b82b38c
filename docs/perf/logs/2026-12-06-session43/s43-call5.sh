#!/usr/bin/env bash
# Session 43, call 5: the review mends (read_error_word without a second pointer check; SmallQuantize serving the
# midpoint test; one sm_120 probe for both shard tests): the GPU tests they touch and every check() path (quantize,
# dequantize, the layer, prepack), then the TP8 shard's bench with its own read probe and cuBLAS bf16.
# carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz
timeout 330 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 \
  --gtest_filter='QuantizeGpu.*:MoeShards.*:MoeLayerArgs.*:MoeRobustness.BadWeightsAreRejectedAtInit:MoeRobustness.EveryBad*:MoeGpu.ZeroTokensIsANoOp:MoeGpu.PrefillTileMatchesTheReference' \
  > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"; grep -E "tests ran|PASSED|FAILED|SKIPPED|preset shards" "$OUT/gpu-tests.log" | tail -8
timeout 60 build-sm90/fp4moe bench --tp 8 --tokens 1 8 64 512 --markdown "$OUT/bench-tp8.md" > "$OUT/bench-tp8.log" 2>&1
echo "bench rc $? [$SECONDS s]"; cat "$OUT/bench-tp8.md"
s41_pack
