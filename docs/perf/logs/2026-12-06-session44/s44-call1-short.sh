#!/usr/bin/env bash
# Session 44, the short form of call 1 (for little device time left): the GPU tests that changed or read the changed
# workspace view since the last run in which all passed (session 43, call 1), the tail-kernel test's deterministic check
# among them, then the TP8 and EP8 shards' benches with the run's own read probe and cuBLAS bf16.
# carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz
timeout 200 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 \
  --gtest_filter='MoeShards.*:QuantizeGpu.*:MoeGpu.*:MoeLayerArgs.*:MoeDirect.*:MoeRobustness.*:-MoeShards.EveryPreset*' \
  > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"; grep -E "tests ran|PASSED|FAILED|SKIPPED" "$OUT/gpu-tests.log" | tail -8
for s in "tp 8" "ep 8"; do
  n=${s/ /}
  timeout 40 build-sm90/fp4moe bench --$s --tokens 1 8 64 512 --markdown "$OUT/bench-$n.md" > "$OUT/bench-$n.log" 2>&1
  echo "bench $n rc $? [$SECONDS s]"; cat "$OUT/bench-$n.md"
done
s41_pack
