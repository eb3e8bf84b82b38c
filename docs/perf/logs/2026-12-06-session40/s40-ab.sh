#!/usr/bin/env bash
# Session 40: an experiment build (build-$V: its fp4moe and tests/fp4moe_gpu_tests, packed here as .device/$V.tgz)
# against HEAD's CLI (build-sm90/fp4moe in .device/gpu.tgz), alternated twice: TP8 and EP8 at T=8..128 (block_m 8) and
# T=256 (block_m 16), the full layer at T=1, 8, 64 (block_m 8), each run's chain per pass printed; ncu of the TP8 down
# GEMM at T=64 for both binaries (warp states, speed of light); then the experiment build's GPU tests in the time left.
# carry [".device/gpu.tgz", ".device/$V.tgz"]. As run:
#   call 1  V=er bash s40-ab.sh   the down epilogue's row data loaded during the item's first step (kEarlyRows)
#   call 2  V=ci bash s40-ab.sh   that, and each block's items a contiguous range (an expert chunk's N tiles in a row,
#           the chunk looked up once by the producer and the consumers)
set -uo pipefail
V=${V:?the experiment build: build-$V, .device/$V.tgz}
tar xzf .device/gpu.tgz && tar xzf .device/$V.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base $V; do
    bin=build-$V/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="8 16 32 64 128";; ep8) a="--ep 8"; t="8 16 32 64 128";; full) a=""; t="1 8 64";; esac
      $bin bench $a --tokens $t --block-m 8 --iters 20 --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
      $bin bench $a --tokens 256 --block-m 16 --iters 20 --json $L/$s-$v-$r-256.json > $L/$s-$v-$r-256.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r-256.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
K='regex:MoeGemmConfigILi8ELi128ELi256ELi3ELi90ELi3EEELNS0_11MoeEpilogueE1'
for v in base $V; do
  bin=build-$V/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
  timeout 120 /usr/local/cuda/bin/ncu --kernel-name-base mangled -k "$K" --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats \
    $bin bench --tp 8 --tokens 64 --block-m 8 --iters 5 --no-graph > $OUT/ncu-down-T64-$v.txt 2>&1
  echo "ncu $v rc $? [$SECONDS s]"
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Stall (Long|Wait|Not|Math|Barrier|Short)|Registers Per" \
    $OUT/ncu-down-T64-$v.txt | head -20
done
left=$(( ${FP4MOE_CALL_LIMIT:-570} - SECONDS ))
echo "GPU tests of build-$V, $left s left"
[ $left -gt 30 ] && timeout $left build-$V/tests/fp4moe_gpu_tests > $OUT/gpu-tests-$V.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-$V.log | head -20
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
