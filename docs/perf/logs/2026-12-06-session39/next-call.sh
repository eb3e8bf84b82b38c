#!/usr/bin/env bash
# Prepared in session 39 for an H200 (not run): (1) s39-call6.sh's forced gate_up grids on the H200, where the shards'
# gate_up runs at 76-78% of the read probe against 90% for the same kernel on the unsharded layer (on the H100 gate_up's
# time at T=64 did not depend on the grid); (2) ncu of the 8-token gate_up (the 3-block config) at TP8 T=64: how its
# 113 us divide between the stream and the start and drain (SM activity over time, warp stall reasons, pipe
# utilization). Here first, on HEAD:
#   git apply docs/perf/logs/2026-12-06-session39/variant-gate-up-grid-forced.patch
#   cmake --preset gpu-sm90 -B build-gg && cmake --build build-gg -j2 --target fp4moe_cli && git checkout src
#   tar czf .device/gg.tgz build-gg/fp4moe
# then run this with carry [".device/gg.tgz"], kind nvidia-h200, needs_h200 true (about 3 minutes).
set -uo pipefail
tar xzf .device/gg.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/smi.txt
grep -q H200 $OUT/smi.txt || echo "not an H200: the grid rows compare with the H100's of call 6, the ncu part still says which unit waits"
# (its own $OUT: it packs and empties the folder it is given)
mkdir -p $OUT/grid && OUT=$OUT/grid bash docs/perf/logs/2026-12-06-session39/s39-call6.sh > $OUT/grid.txt 2>&1
grep " grid " $OUT/grid.txt
K='regex:MoeGemmConfigILi8ELi128ELi256ELi3ELi90ELi3EEELNS0_11MoeEpilogueE0'
timeout 200 /usr/local/cuda/bin/ncu --kernel-name-base mangled -k "$K" --launch-skip 5 --launch-count 1 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section InstructionStats --section Occupancy \
  build-gg/fp4moe bench --tp 8 --tokens 64 --block-m 8 --iters 5 --no-graph > $OUT/ncu-gate-up-T64.txt 2>&1
echo "ncu rc $?"
grep -iE "Duration|Issue Slots Busy|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Pipe|Shared|DRAM Throughput|Compute \(SM\)|Memory Throughput|Stall|Achieved Occupancy|Registers" \
  $OUT/ncu-gate-up-T64.txt | head -60
cd $OUT && tar czf /tmp/b.tgz --exclude=b.tgz . && find . -mindepth 1 -delete && mv /tmp/b.tgz . && ls -la
