#!/usr/bin/env bash
# Session 41, call 14 (after the review mends: whole_gate_up_tiles moved to kernels/moe_gemm_items.h, SASS unchanged):
# HEAD's shard GPU tests (the tail kernel's test now calls whole_gate_up_tiles), and HEAD's CLI against 880730c's
# (build-base/fp4moe, the same kernels) alternated twice at T=16..64 on both shards, the 8-token tile.
# Here first: FP4MOE_SKIP_WHEEL=1 FP4MOE_BASE_BUILD=<880730c's fp4moe> scripts/gpu-build. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz
s41_tests 'MoeShards.*:PlannerGpu.*:MoeDirect.*'
V_NAMES=(base head)
declare -A V_BIN=([base]=build-base/fp4moe [head]=build-sm90/fp4moe) V_FLAGS=() V_ENV=()
S_NAMES=(tp8 ep8)
declare -A S_ARGS=([tp8]="--tp 8" [ep8]="--ep 8") S_TOKENS=([tp8]="16 32 48 64" [ep8]="16 32 48 64")
AB_ARGS="--block-m 8 --iters 20" s41_ab
s41_pack
