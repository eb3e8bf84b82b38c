#!/usr/bin/env bash
# Session 41, call 3: mbarrier waits with a suspend-time hint (mbarrier.try_wait's suspendTimeHint, 10 ms: the warp
# sleeps until the phase completes instead of spinning; build-hint/fp4moe in .device/hint.tgz, on top of 48ada9f)
# against 48ada9f (build-sm90 in .device/gpu.tgz), alternated twice, each at the layer's own pick: TP8 and EP8 at
# T=1..4096, the full layer at T=1..2048, each run's chain per pass printed; then ncu of down at TP8 T=512 (block_m 32)
# for the hint build (its retry loops: call 2 counted 6.7 M spin instructions, 12% of the kernel's).
# carry [".device/gpu.tgz", ".device/hint.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz .device/hint.tgz
V_NAMES=(head hint)
declare -A V_BIN=([head]=build-sm90/fp4moe [hint]=build-hint/fp4moe) V_FLAGS=() V_ENV=()
S_NAMES=(tp8 ep8 full)
declare -A S_ARGS=([tp8]="--tp 8" [ep8]="--ep 8" [full]="")
declare -A S_TOKENS=([tp8]="1 2 8 16 64 128 256 512 1024 2048 4096" [ep8]="1 2 8 16 64 128 256 512 1024 2048 4096"
                     [full]="1 8 64 512 2048")
AB_ARGS="--iters 20" s41_ab
NCU_ARGS=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats)
s41_ncu ncu-down-tp8-512-hint 120 build-hint/fp4moe 'moe_gemm_ws_kernel.*MoeEpilogueE1' --tp 8 --tokens 512 --block-m 32 --iters 5 --no-graph
grep -E "Duration|DRAM Throughput|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Issued Warp" $OUT/ncu-down-tp8-512-hint.txt | head
s41_pack
