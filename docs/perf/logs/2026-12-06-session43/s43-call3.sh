#!/usr/bin/env bash
# Session 43, call 3: only on an H200 (it exits at once on any other GPU): shards.md's TP8 and EP8 tables at HEAD
# (s41_tables: every T of those tables, the layer's own pick, each bench with its own probe and cuBLAS) and
# moe-decode.md's unsharded table, then every GPU test of HEAD (the new preset-shard test among them) with the time
# left. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz
if ! grep -q H200 "$OUT/smi.txt"; then echo "not an H200: nothing run"; exit 0; fi
s41_tables 300
# moe-decode.md's table of the unsharded layer at HEAD
timeout 120 build-sm90/fp4moe bench --tokens 1 2 8 64 256 512 1024 2048 4096 8192 16384 --json "$OUT/bench.json" \
  --markdown "$OUT/bench.md" > "$OUT/bench.log" 2>&1
echo "bench full rc $? [$SECONDS s]"
left=$(( 585 - SECONDS ))
timeout $left build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc $? [$SECONDS s]"; grep -E "tests ran|PASSED|FAILED|SKIPPED|preset shards" "$OUT/gpu-tests.log" | tail -6
s41_pack
