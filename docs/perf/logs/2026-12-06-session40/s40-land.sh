#!/usr/bin/env bash
# Session 40, call 5: gate_up's tail kernel as landed (MoeLayerOptions::gate_up_tail, build-tl: fp4moe and
# tests/fp4moe_gpu_tests, packed here as .device/tl.tgz) against cb4a2eb's CLI (build-sm90/fp4moe in .device/gpu.tgz) and
# against itself with --no-gate-up-tail, alternated twice, each at the layer's own pick: TP8 and EP8 at T=8..128 and the
# full layer at T=1, 8, 64, each run's chain per pass printed; then every GPU test of build-tl.
# carry [".device/gpu.tgz", ".device/tl.tgz"]. (next-call.sh runs it on other builds: NEW and BASE name the two
# build folders, ARCHIVES what to unpack, TEST_FILTER the GPU tests, PACK=0 leaves $OUT unpacked.)
set -uo pipefail
NEW=${NEW:-build-tl} BASE=${BASE:-build-sm90}
for a in ${ARCHIVES:-.device/gpu.tgz .device/tl.tgz}; do tar xzf $a; done
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in base tl tlno; do
    bin=$NEW/fp4moe; [ $v = base ] && bin=$BASE/fp4moe
    flag=(); [ $v = tlno ] && flag=(--no-gate-up-tail)
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="8 16 24 32 48 64 128";; ep8) a="--ep 8"; t="8 16 24 32 48 64 128";; full) a=""; t="1 8 64";; esac
      FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --iters 20 "${flag[@]}" --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
left=$(( ${FP4MOE_CALL_LIMIT:-570} - SECONDS ))
echo "GPU tests of $NEW, $left s left"
[ $left -gt 30 ] && timeout $left $NEW/tests/fp4moe_gpu_tests --gtest_filter="${TEST_FILTER:-*}" > $OUT/gpu-tests-tl.log 2>&1
echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests-tl.log | head -20
grep -A3 "GateUpTailPieces" $OUT/gpu-tests-tl.log | head -8
[ "${PACK:-1}" = 1 ] && cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
exit 0
