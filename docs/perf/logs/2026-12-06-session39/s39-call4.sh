#!/usr/bin/env bash
# Session 39 call 4: the multistage 8-token tile's mma.sync loop with two accumulator chains a warp (each half group's
# second k16 MMA into a second set of accumulators, added to the first at the item's end): whether the 16 dependent MMAs
# a warp and stage hold a block's stream. Experiment build build-acc (cmake --preset gpu-sm90 -B build-acc with
# -DFP4MOE_EXP_ACC2=1 in CMAKE_CUDA_FLAGS; fp4moe_cli and fp4moe_gpu_tests in .device/acc.tgz) against HEAD's CLI
# (build-sm90/fp4moe in .device/gpu.tgz), alternated twice, TP8 and EP8 at T=3..128 and the full layer at T=1, 8, 16,
# 64, all at block_m 8; then build-acc's GPU tests. carry [".device/gpu.tgz", ".device/acc.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz && tar xzf .device/acc.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base acc; do
    bin=build-acc/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="3 4 5 6 8 16 32 64 128";; ep8) a="--ep 8"; t="3 4 5 6 8 16 32 64 128";;
                 full) a=""; t="1 8 16 64";; esac
      FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --block-m 8 --iters 20 > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
left=$(( ${FP4MOE_CALL_LIMIT:-570} - SECONDS ))
echo "GPU tests of build-acc, $left s left"
[ $left -gt 30 ] && timeout $left build-acc/tests/fp4moe_gpu_tests > $OUT/gpu-tests-acc.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-acc.log | head -20
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
