#!/usr/bin/env bash
# Session 41, call 2: the build with only block 0 of gate_up's tail kernel waiting for the whole-tile kernel (call 1's
# b0, now in build-sm90: .device/gpu.tgz): its shard GPU tests; an A/B at T=64..128 against build-t128 (the same with
# the tail kernel allowed up to T=128 instead of 64: .device/t128.tgz) and against itself with --no-gate-up-tail,
# alternated twice, the 8-token tile; ncu of down at TP8 T=512 (the 32-token warp-specialized tile): warp states,
# instruction counts and the SASS listing with each instruction's executions and stall samples; then, on an H200, the
# shard tables with the time left. carry [".device/gpu.tgz", ".device/t128.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz .device/t128.tgz
s41_tests 'MoeShards.*:PlannerGpu.*:MoeDirect.*'
V_NAMES=(b0 no t128)
declare -A V_BIN=([b0]=build-sm90/fp4moe [no]=build-sm90/fp4moe [t128]=build-t128/fp4moe) V_FLAGS=([no]=--no-gate-up-tail) V_ENV=()
S_NAMES=(tp8 ep8)
declare -A S_ARGS=([tp8]="--tp 8" [ep8]="--ep 8") S_TOKENS=([tp8]="48 64 80 96 112 128" [ep8]="48 64 80 96 112 128")
AB_ARGS="--block-m 8 --iters 20" AB_ENV=FP4MOE_PRINT_PLANS=1 s41_ab
NCU_ARGS=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats
          --section SourceCounters --section LaunchStats -o "$OUT/ncu-down-tp8-512")
s41_ncu ncu-down-tp8-512 150 build-sm90/fp4moe 'moe_gemm_ws_kernel.*MoeEpilogueE1' --tp 8 --tokens 512 --block-m 32 --iters 5 --no-graph
$NCU -i $OUT/ncu-down-tp8-512.ncu-rep --page details > $OUT/ncu-down-tp8-512-details.txt 2>&1
$NCU -i $OUT/ncu-down-tp8-512.ncu-rep --page source --print-source sass --csv > $OUT/ncu-down-tp8-512-sass.csv 2>&1
echo "sass csv $(wc -l < $OUT/ncu-down-tp8-512-sass.csv) lines"
grep -E "Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Ipc|Registers Per" \
  $OUT/ncu-down-tp8-512-details.txt | head -12
s41_tables ${FP4MOE_CALL_LIMIT:-580}
s41_pack
