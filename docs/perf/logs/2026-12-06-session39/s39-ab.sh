#!/usr/bin/env bash
# Session 39 calls 1, 4 and 5: an experiment build (build-$V, packed here as .device/$V.tgz with its fp4moe and
# tests/fp4moe_gpu_tests) against HEAD's CLI (cb4a2eb: build-sm90/fp4moe in .device/gpu.tgz), alternated twice, TP8 and
# EP8 at $SHARD_TOKENS and the full layer at T=1, 8, 16, 64, all at block_m 8, each run's chain per pass printed; then
# the experiment build's GPU tests in the time left. carry [".device/gpu.tgz", ".device/$V.tgz"]. As run:
#   call 1  V=kw DEEP=1 bash s39-ab.sh   two warps a row tile (variant-two-warps-a-row-tile.patch, built with
#           -DFP4MOE_EXP_KWARPS=2 in CMAKE_CUDA_FLAGS and CMAKE_CXX_FLAGS); DEEP=1 adds the variant "kwdeep", the same
#           binary with FP4MOE_EXP_DEEP=1 (the 2-block config wherever the 8-token tile runs)
#   call 4  V=acc bash s39-ab.sh         two MMA chains a warp (variant-two-accumulator-chains.patch, -DFP4MOE_EXP_ACC2=1)
#   call 5  V=ob SHARD_TOKENS="4 6 8 16 32 64 128" FP4MOE_CALL_LIMIT=330 bash s39-ab.sh
#           one block an SM with two warps a row tile (variant-two-warps-a-row-tile.patch, then
#           variant-one-block-two-warps.patch; -DFP4MOE_EXP_KWARPS=2 -DFP4MOE_EXP_ONE_BLOCK=1)
set -uo pipefail
V=${V:?the experiment build: build-$V, .device/$V.tgz}
SHARD_TOKENS=${SHARD_TOKENS:-3 4 5 6 8 16 32 64 128}
variants="base $V"; [ "${DEEP:-0}" = 1 ] && variants="$variants ${V}deep"
tar xzf .device/gpu.tgz && tar xzf .device/$V.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in $variants; do
    bin=build-$V/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
    deep=(env -u FP4MOE_EXP_DEEP); [ $v = ${V}deep ] && deep=(env FP4MOE_EXP_DEEP=1)
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t=$SHARD_TOKENS;; ep8) a="--ep 8"; t=$SHARD_TOKENS;; full) a=""; t="1 8 16 64";; esac
      "${deep[@]}" FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --block-m 8 --iters 20 > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
left=$(( ${FP4MOE_CALL_LIMIT:-570} - SECONDS ))
echo "GPU tests of build-$V, $left s left"
[ $left -gt 30 ] && timeout $left build-$V/tests/fp4moe_gpu_tests > $OUT/gpu-tests-$V.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-$V.log | head -20
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
