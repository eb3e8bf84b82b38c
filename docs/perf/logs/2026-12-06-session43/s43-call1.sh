#!/usr/bin/env bash
# Session 43, call 1: HEAD's GPU checks with the new test of every preset's TP and EP shards at their real shapes
# (MoeShards.EveryPresetShardMatchesTheReference): scripts/gpu-suite's tests and nccl sections (every GPU test), then
# the Python tests against the source tree's package. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session42/s42-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/smi.txt" 2>&1; cat "$OUT/smi.txt"
s42_suite 4 450
grep -E "^(preset shards|[a-z0-9.-]+ +(TP|EP)[0-9])|no sm_120 runs" "$OUT/logs/gpu-tests.log" > "$OUT/preset-shards.txt"
grep -E "preset shards|EveryPreset" "$OUT/logs/gpu-tests.log" | head -5
s42_pytest
s41_pack
