#!/usr/bin/env bash
# Session 41, call 4: which pipe bounds the warp-specialized tile's consumers at T=512 (call 2 found them setting the
# pace below full issue): ncu of gate_up and down at TP8 T=512 and down at EP8 T=512 (block_m 32) with every SM pipe's
# utilization (the tensor pipe's wgmma cycles among them), the compute workload and warp-state sections.
# carry [".device/gpu.tgz"] (48ada9f's build).
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz
NCU=/usr/local/cuda/bin/ncu; [ -x $NCU ] || NCU=$(command -v ncu)
$NCU --query-metrics 2>/dev/null | grep -E "^sm__(pipe|inst_executed_pipe)" > $OUT/metrics-list.txt; wc -l < $OUT/metrics-list.txt
M='regex:^sm__(pipe_[a-z_]*cycles_active|inst_executed_pipe_[a-z_]*)\.avg\.pct_of_peak_sustained_active$'
NCU_ARGS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats
          --metrics "$M")
for job in "tp8 gu E0" "tp8 down E1" "ep8 down E1"; do
  set -- $job; a="--tp 8"; [ $1 = ep8 ] && a="--ep 8"
  # shellcheck disable=SC2086
  s41_ncu ncu-$1-$2-512 150 build-sm90/fp4moe "moe_gemm_ws_kernel.*MoeEpilogue$3" $a --tokens 512 --block-m 32 --iters 5 --no-graph
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|No Eligible|pct_of_peak" $OUT/ncu-$1-$2-512.txt | sort -k3 -n -r | head -14
done
s41_pack
