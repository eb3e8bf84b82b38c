#!/usr/bin/env bash
# Session 44, call 2: only on an H200 (it exits at once on any other GPU), with the session's last device time: every
# GPU test of HEAD but the test of every preset's shards (180 s on an H100; it ran in call 1), then the TP8 and EP8
# shards' benches with the run's own read probe and cuBLAS bf16. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
. docs/perf/logs/2026-12-06-session44/s44-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz
if ! grep -q H200 "$OUT/smi.txt"; then echo "not an H200: nothing run"; exit 0; fi
timeout 160 build-sm90/tests/fp4moe_gpu_tests --gtest_filter='-MoeShards.EveryPresetShardMatchesTheReference' \
  > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"; grep -E "tests ran|PASSED|FAILED|SKIPPED" "$OUT/gpu-tests.log" | tail -6
s44_benches 30
s41_pack
