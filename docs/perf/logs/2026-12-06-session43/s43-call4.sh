#!/usr/bin/env bash
# Session 43, call 4: the preset-shard test with its sm_120 runs' plans checked too (mma.sync only, at most the arch
# table's 101,376 B a block), with the sm_120 configs' own test; the run lines in $OUT/preset-shards.txt.
# carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz
timeout 400 build-sm90/tests/fp4moe_gpu_tests \
  --gtest_filter='MoeShards.EveryPresetShardMatchesTheReference:MoeShards.Sm120ConfigsMatchTheReferenceOnTheH200' \
  > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"
grep -E "^(preset shards|[a-z0-9.-]+ +(TP|EP)[0-9])" "$OUT/gpu-tests.log" > "$OUT/preset-shards.txt"
grep -E "preset shards|PASSED|FAILED|OK \]" "$OUT/gpu-tests.log" | tail -8
s41_pack
