#!/usr/bin/env bash
# Session 41, call 1: HEAD's shard GPU tests (the tail kernel's test as strengthened after session 40's review: tail
# on and off compared bit for bit; not run before), then an A/B of gate_up's tail kernel at T=16..64 on both GLM-5
# shards: HEAD (build-sm90, .device/gpu.tgz), HEAD with --no-gate-up-tail, and HEAD with only block 0 of the tail
# kernel waiting for the whole-tile kernel (variant-tail-block0-wait.patch of session 40; build-b0/fp4moe in
# .device/b0.tgz), alternated twice, the 8-token tile (the layer's pick at these T); then, on an H200, the shard
# tables (fp4moe bench --tp 8 / --ep 8 --markdown at the layer's own pick) with the time left.
# carry [".device/gpu.tgz", ".device/b0.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz .device/b0.tgz
s41_tests 'MoeShards.*:PlannerGpu.*:MoeDirect.*'
V_NAMES=(tl tlno b0)
declare -A V_BIN=([tl]=build-sm90/fp4moe [tlno]=build-sm90/fp4moe [b0]=build-b0/fp4moe) V_FLAGS=([tlno]=--no-gate-up-tail) V_ENV=()
S_NAMES=(tp8 ep8)
declare -A S_ARGS=([tp8]="--tp 8" [ep8]="--ep 8") S_TOKENS=([tp8]="16 24 32 48 64" [ep8]="16 24 32 48 64")
AB_ARGS="--block-m 8 --iters 20" AB_ENV=FP4MOE_PRINT_PLANS=1 s41_ab
s41_tables ${FP4MOE_CALL_LIMIT:-580}
s41_pack
