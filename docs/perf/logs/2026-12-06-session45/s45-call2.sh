#!/usr/bin/env bash
# Session 45, call 2: only on an H200 (it exits at once on any other GPU): every GPU test of HEAD, the test of every
# preset's shards among them (so far run on H100s only), then the TP8 and EP8 shards' benches with the run's own read
# probe and cuBLAS bf16. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
. docs/perf/logs/2026-12-06-session44/s44-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
cat "$OUT/smi.txt"
if ! grep -q H200 "$OUT/smi.txt"; then echo "not an H200: nothing run"; exit 0; fi
s41_start .device/gpu.tgz
timeout 360 build-sm90/tests/fp4moe_gpu_tests > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"
grep -E "tests ran|PASSED  \]|FAILED|SKIPPED  \]|preset shards" "$OUT/gpu-tests.log" | tail -8
s44_benches 40
s41_pack
