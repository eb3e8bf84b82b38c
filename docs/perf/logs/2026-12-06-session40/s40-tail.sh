#!/usr/bin/env bash
# Session 40, calls 3 and 4: gate_up's last, partial round of tiles as a second kernel that splits those tiles' K (the
# experiment build build-tl, variant-gate-up-tail-kernel.patch, packed here as .device/tl.tgz; FP4MOE_EXP_TAIL=s
# turns it on, s pieces a tile; FP4MOE_EXP_TAIL_ROUNDS=r splits r whole rounds too; variant tlS or tlSrR) against HEAD's CLI (build-sm90/fp4moe in .device/gpu.tgz) and against the same binary
# with it off, alternated twice: TP8 and EP8 at T=8..128 and the full layer at T=8, 64 (block_m 8), each run's chain
# per pass printed; then the GPU tests of the shards and the layer with FP4MOE_EXP_TAIL=4.
# carry [".device/gpu.tgz", ".device/tl.tgz"]. As run:
#   call 3  bash s40-tail.sh                                    (VARIANTS="tl0 tl2 tl4 tl8")
#   call 4  VARIANTS="tl4 tl2r1 tl4r1" TESTS=0 bash s40-tail.sh
set -uo pipefail
tar xzf .device/gpu.tgz && tar xzf .device/tl.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base ${VARIANTS:-tl0 tl2 tl4 tl8}; do
    bin=build-tl/fp4moe; [ $v = base ] && bin=build-sm90/fp4moe
    tail=(env -u FP4MOE_EXP_TAIL -u FP4MOE_EXP_TAIL_ROUNDS)
    case $v in tl[2-9]*) x=${v#tl}; tail=(env FP4MOE_EXP_TAIL=${x%%r*} FP4MOE_EXP_TAIL_ROUNDS=$([ "$x" = "${x#*r}" ] && echo 0 || echo ${x#*r}));; esac
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="8 16 32 64 128";; ep8) a="--ep 8"; t="8 16 32 64 128";; full) a=""; t="8 64";; esac
      "${tail[@]}" $bin bench $a --tokens $t --block-m 8 --iters 20 --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
left=$(( ${FP4MOE_CALL_LIMIT:-570} - SECONDS )); [ "${TESTS:-1}" = 0 ] && left=0
echo "GPU tests (MoeShards, MoeGpu) of build-tl with FP4MOE_EXP_TAIL=4, $left s left"
[ $left -gt 30 ] && FP4MOE_EXP_TAIL=4 timeout $left build-tl/tests/fp4moe_gpu_tests --gtest_filter='MoeShards.*:MoeGpu.*' > $OUT/gpu-tests-tl4.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-tl4.log | head -30
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
