#!/usr/bin/env bash
# Session 22 call 5: ncu of the column-slice down kernel v3b (build-c5) at TP8 T=64, block_m 8: where its warps wait.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
timeout 150 /usr/local/cuda/bin/ncu --kernel-name-base mangled -k 'regex:down_columns' --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  build-c5/fp4moe bench --tp 8 --tokens 64 --block-m 8 --iters 5 --no-graph > $L/ncu-v3b-T64.txt 2>&1
echo "ncu sections rc $?"
timeout 150 /usr/local/cuda/bin/ncu --kernel-name-base mangled -k 'regex:down_columns' --launch-skip 3 --launch-count 1 \
  --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio \
  build-c5/fp4moe bench --tp 8 --tokens 64 --block-m 8 --iters 5 --no-graph > $L/ncu-v3b-T64-stalls.txt 2>&1
echo "ncu rc $?"
grep -iE "stall|Duration|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|DRAM Throughput|Compute \(SM\)|Memory Throughput|Stall|Achieved Occupancy|Registers|Dynamic Shared" $L/ncu-v3b-T64.txt | head -30
grep -E "stalled|==ERROR" $L/ncu-v3b-T64-stalls.txt | head -20
cd $OUT && tar czf logs.tgz logs
