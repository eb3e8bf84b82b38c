#!/usr/bin/env bash
# Session 21 call 4 (call 3 matched only the finalize): ncu of the TP8 down GEMM (128-token tile, fp32 partials) at T=16384, 3ceac52's kernels
# (build-v2); and the same for the full layer's down at T=4096.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" > $L/summary.txt
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section LaunchStats"
timeout 200 $NCU --clock-control none --kernel-name-base mangled -k 'regex:moe_gemm_ws_kernel.*ILi128ELi256ELi128ELi4ELi90EEELNS0_11MoeEpilogueE1' -c 1 $S \
  build-v2/fp4moe bench --tp 8 --tokens 16384 --block-m 128 --no-graph --iters 5 > $L/ncu-tp8-16384.txt 2>&1
echo "tp8 rc $?" >> $L/summary.txt
timeout 200 $NCU --clock-control none --kernel-name-base mangled -k 'regex:moe_gemm_ws_kernel.*ILi128ELi256ELi128ELi4ELi90EEELNS0_11MoeEpilogueE1' -c 1 $S \
  build-v2/fp4moe bench --tokens 4096 --block-m 128 --no-graph --iters 5 > $L/ncu-full-4096.txt 2>&1
echo "full rc $?" >> $L/summary.txt
cat $L/summary.txt
for n in tp8-16384 full-4096; do echo "== $n"; grep -E "^  [a-zA-Z_].*(moe_|finalize|ws_kernel|Profiling)|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Stall|lg_throttle|Compute \(SM\) Throughput|Mem Busy|Max Bandwidth|Mem Pipes Busy|SM Busy" $L/ncu-$n.txt | cut -c1-150 | head -70; done
cd $OUT && tar czf logs.tgz logs
