#!/usr/bin/env bash
# Session 43, call 6: the tail-kernel test's check of its pieces by the partial sums they write (testing::MoeWorkspaceView
# gate_up_partials) instead of by changed output bits, which call 5 showed to be chance; the tests call 5 ran, again,
# and the direct, robustness and layer tests that read the workspace view. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz
timeout 200 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 --gtest_repeat=1 \
  --gtest_filter='MoeShards.GateUpTail*:MoeShards.GateUpSplitK*:QuantizeGpu.*:MoeGpu.*:MoeLayerArgs.*:MoeDirect.*:MoeRobustness.EveryBad*:MoeRobustness.BadWeights*' \
  > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"; grep -E "tests ran|PASSED|FAILED|SKIPPED" "$OUT/gpu-tests.log" | tail -8
s41_pack
