#!/usr/bin/env bash
# Session 45, call 1: every GPU test at HEAD 6c8443d (scripts/gpu-suite's tests, nccl and python sections: the C++ GPU
# tests, the NCCL tests, the wheel's Python tests), then the TP8 and EP8 shards' benches with the run's own read probe and cuBLAS bf16.
# carry [".device/gpu.tgz"] (built by scripts/gpu-build with the wheel).
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
. docs/perf/logs/2026-12-06-session44/s44-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv > "$OUT/smi.txt" 2>&1; cat "$OUT/smi.txt"
tar xzf .device/gpu.tgz
FP4MOE_SUITE="tests nccl python" TAIL=4 timeout 470 scripts/gpu-suite
echo "suite rc $? [$SECONDS s]"
. scripts/gpu-env
tar xzOf "$OUT/gpu-suite-logs.tgz" --wildcards '*gpu-tests.log' 2>/dev/null | grep -E "GateUpTail|preset shards" | head -6
s44_benches 40
s41_pack
