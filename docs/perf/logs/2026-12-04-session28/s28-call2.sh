#!/usr/bin/env bash
# Prepared in session 28 (no device was lent): the fp32 partial stores as one 16-byte store a lane and n-tile
# (variant-vector-partial-stores.patch, build-v6) against 94738ea (build-base), both in .device/bins28b.tgz (tar czf .device/bins28b.tgz build-v6 build-base).
# All GPU tests of build-v6, then decode (graph, chain) and prefill (--no-graph) A/B on the three shapes, alternated.
# Run: bash .device/s28-call2.sh, carry [".device/bins28b.tgz", ".device/s28-call2.sh"]. About 6 minutes.
set -uo pipefail
. scripts/gpu-env
tar xzf .device/bins28b.tgz
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 150 build-v6/tests/fp4moe_gpu_tests > $L/gpu-tests-v6.log 2>&1
echo "gpu tests v6 rc $?"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v6.log | head -8
for r in 1 2; do
  for v in base v6; do
    for a in "--tp 8" "--ep 8" ""; do
      tag=$(echo "${a:-full}" | tr -d ' -')
      timeout 100 build-$v/fp4moe bench $a --tokens 8 64 512 --iters 20 > $L/dec-$v-$tag-$r.log 2>&1
      echo "dec $v $tag r$r: $(scripts/bench-summary $L/dec-$v-$tag-$r.log | cut -c1-200)"
    done
  done
done
for r in 1 2; do
  for v in base v6; do
    for a in "--tp 8" "--ep 8" ""; do
      tag=$(echo "${a:-full}" | tr -d ' -')
      timeout 120 build-$v/fp4moe bench $a --tokens 4096 16384 --no-graph --iters 5 > $L/pf-$v-$tag-$r.log 2>&1
      echo "pf $v $tag r$r: $(scripts/bench-summary $L/pf-$v-$tag-$r.log | cut -c1-200)"
    done
  done
done
cd $OUT && tar czf logs.tgz logs
