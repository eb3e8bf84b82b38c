#!/usr/bin/env bash
# Session 39 call 5: the 8-token tile's deep config at one block an SM with two warps a 16-row weight tile (512 threads,
# 6 stages, no cluster kernel; the layer then takes it for gate_up wherever its rounds fill better than the 3-block
# config's: every decode T): fewer, faster blocks, so that a partial last round costs a shorter item. Experiment build
# build-ob (cmake --preset gpu-sm90 -B build-ob with -DFP4MOE_EXP_KWARPS=2 -DFP4MOE_EXP_ONE_BLOCK=1 in CMAKE_CUDA_FLAGS
# and CMAKE_CXX_FLAGS: variant-one-block-two-warps.patch, which holds the two-warp change too) against HEAD's CLI,
# alternated twice, at block_m 8; then build-ob's GPU tests. carry [".device/gpu.tgz", ".device/ob.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz && tar xzf .device/ob.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base ob; do
    bin=build-ob/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="4 6 8 16 32 64 128";; ep8) a="--ep 8"; t="4 6 8 16 32 64 128";;
                 full) a=""; t="1 8 16 64";; esac
      FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --block-m 8 --iters 20 > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
left=$(( ${FP4MOE_CALL_LIMIT:-330} - SECONDS ))
echo "GPU tests of build-ob, $left s left"
[ $left -gt 30 ] && timeout $left build-ob/tests/fp4moe_gpu_tests > $OUT/gpu-tests-ob.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-ob.log | head -20
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
