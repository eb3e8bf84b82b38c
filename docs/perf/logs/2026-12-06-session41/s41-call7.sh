#!/usr/bin/env bash
# Session 41, call 7: down on the multistage config of the layer's block_m (16, 32, 64: one 128 x 256 stage an item
# where K = 256) while gate_up keeps the warp-specialized one (variant-down-multistage.patch, FP4MOE_EXP_DOWN_MS=1 in
# build-dms/fp4moe: .device/dms.tgz), against the same binary without the switch and HEAD's (build-sm90,
# .device/gpu.tgz), alternated twice, the layer's own pick: TP8 and EP8 at T=128..1024, the full layer at T=256..1024.
# carry [".device/gpu.tgz", ".device/dms.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz .device/dms.tgz
V_NAMES=(head off on)
declare -A V_BIN=([head]=build-sm90/fp4moe [off]=build-dms/fp4moe [on]=build-dms/fp4moe) V_FLAGS=()
declare -A V_ENV=([head]=FP4MOE_EXP_DOWN_MS=0 [off]=FP4MOE_EXP_DOWN_MS=0 [on]=FP4MOE_EXP_DOWN_MS=1)
S_NAMES=(tp8 ep8 full)
declare -A S_ARGS=([tp8]="--tp 8" [ep8]="--ep 8" [full]="")
declare -A S_TOKENS=([tp8]="128 256 384 512 768 1024" [ep8]="128 256 384 512 768 1024" [full]="256 512 1024")
AB_ARGS="--iters 20" AB_ENV=FP4MOE_PRINT_PLANS=1 AB_CUT=-c1-400 s41_ab
s41_pack
