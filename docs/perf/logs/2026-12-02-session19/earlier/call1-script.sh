#!/usr/bin/env bash
# Session 19 call 1: ncu of every kernel of a T=8 step (routing, gate_up, down, finalize) on TP8, EP8 and the full layer (c89c492).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" > $L/summary.txt
for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
  set -- $s; n=$1; shift
  timeout 150 $NCU --clock-control none -k regex:moe_ -c 8 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    build-cur/fp4moe bench "$@" --tokens 8 --block-m 8 --iters 5 --no-graph > $L/ncu-$n.txt 2>&1
  echo "$n rc $?" >> $L/summary.txt
done
for n in tp8 ep8 full; do echo "== $n"; grep -E "^  [a-z].*moe_|Duration|DRAM Throughput|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Waves Per SM|Max Bandwidth|SM Active Cycles|Elapsed Cycles" $L/ncu-$n.txt | head -100; done
cd $OUT && tar czf logs.tgz logs
