#!/usr/bin/env bash
# Session 39 call 1: two warps a 16-row weight tile in the 8- and 16-token multistage tiles' 2-block configs (each warp
# multiplying half of every stage's K groups; the sums meet in the first warp). The experiment build (build-kw:
# cmake --preset gpu-sm90 -B build-kw with -DFP4MOE_EXP_KWARPS=2 in CMAKE_CUDA_FLAGS and CMAKE_CXX_FLAGS; targets
# fp4moe_cli and fp4moe_gpu_tests, in .device/kw.tgz) against HEAD's CLI (cb4a2eb: build-sm90/fp4moe in .device/gpu.tgz),
# alternated twice: base, kw (the layer's own plan) and kwdeep (FP4MOE_EXP_DEEP=1: the 2-block config wherever the 8-token
# tile runs); TP8 and EP8 at T=3..128, the full layer at T=1, 8, 16, 64, all at block_m 8. Then build-kw's GPU tests.
# carry [".device/gpu.tgz", ".device/kw.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz && tar xzf .device/kw.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base kw kwdeep; do
    bin=build-kw/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="3 4 5 6 8 16 32 64 128";; ep8) a="--ep 8"; t="3 4 5 6 8 16 32 64 128";;
                 full) a=""; t="1 8 16 64";; esac
      if [ $v = kwdeep ]; then FP4MOE_EXP_DEEP=1 FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --block-m 8 --iters 20 > $L/$s-$v-$r.log 2>&1
      else env -u FP4MOE_EXP_DEEP FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --block-m 8 --iters 20 > $L/$s-$v-$r.log 2>&1; fi
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
left=$(( ${FP4MOE_CALL_LIMIT:-570} - SECONDS ))
echo "GPU tests of build-kw, $left s left"
[ $left -gt 30 ] && timeout $left build-kw/tests/fp4moe_gpu_tests > $OUT/gpu-tests-kw.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-kw.log | head -20
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
