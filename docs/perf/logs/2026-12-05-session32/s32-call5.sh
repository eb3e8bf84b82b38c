#!/usr/bin/env bash
# Session 32, call 5: compute-sanitizer memcheck and initcheck over the 128-token tile's test (every item width against
# the reference) and the wgmma shapes' test, on 8c0ef49's GPU test build.
# Carry [".device/bins-s32c5.tgz"]: build-sm90/tests/fp4moe_gpu_tests.
set -uo pipefail
tar xzf .device/bins-s32c5.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
for tool in memcheck initcheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 99 build-sm90/tests/fp4moe_gpu_tests \
    --gtest_filter='MoeGpu.PrefillTileMatchesTheReference:WgmmaGpu.*' --gtest_brief=1 > $L/sanitize-$tool.log 2>&1
  echo "$tool rc $? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $L/sanitize-$tool.log | tr -s ' ' | tr '\n' ' ')"
done
cd $OUT && tar czf logs.tgz logs
