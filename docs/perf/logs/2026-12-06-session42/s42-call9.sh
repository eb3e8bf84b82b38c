#!/usr/bin/env bash
# Session 42, call 9: the review mends (759695d: shared scale rules, stream-device and error-word helpers, test
# helpers). scripts/gpu-suite's tests and nccl sections, memcheck over the quantize tests, and the TP8 shard's bench
# at T=1 / 8 / 64 / 512 with the run's own read probe and cuBLAS bf16 (no kernel of the layer changed: a check that
# the host-side helpers cost nothing). carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session42/s42-lib.sh
s42_suite 6 300
s42_memcheck 120 'QuantizeGpu.*'
timeout 60 build-sm90/fp4moe bench --tp 8 --tokens 1 8 64 512 --markdown "$OUT/bench-tp8.md" > "$OUT/bench-tp8.log" 2>&1
echo "bench rc $? [$SECONDS s]"; cat "$OUT/bench-tp8.md"
s41_pack
