#!/usr/bin/env bash
# Session 42, call 3: shard_tp_weights' pointer checks (every buffer device memory of the current device, no output
# overlapping an input or another output, before the first copy): the shard GPU tests, with memcheck over the
# tensor-parallel one. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session42/s42-lib.sh
tar xzf .device/gpu.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > "$OUT/smi.txt" 2>&1; cat "$OUT/smi.txt"
timeout 200 build-sm90/tests/fp4moe_gpu_tests --gtest_filter='MoeShards.*' > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$OUT/gpu-tests.log" | head -20
s42_memcheck 200 'MoeShards.TensorParallelSlicesSumToTheFullLayer'
s41_pack
