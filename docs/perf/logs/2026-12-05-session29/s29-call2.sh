#!/usr/bin/env bash
# Session 29 call 2: session 28's fp32 partial stores as 16-byte stores (build-v6, variant-vector-partial-stores.patch)
# against HEAD (build-base): all GPU tests of v6, decode (T=8/64/512) and prefill (T=4096/16384, --no-graph) A/B on the
# full layer, TP8 and EP8, alternated twice; a time guard.
# Binaries: build-variants.sh base v6; tar czf .device/bins29b.tgz build-base build-v6. Run: carry [".device/bins29b.tgz",
#   ".device/s29-call2.sh"], bash .device/s29-call2.sh.
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins29b.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=60 timeout 150 build-v6/tests/fp4moe_gpu_tests > $L/gpu-tests-v6.log 2>&1
echo "gpu tests v6 rc $? at $(el)s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v6.log | head -8
for r in 1 2; do
  for v in base v6; do
    for a in "--tp 8" "--ep 8" ""; do
      tag=$(echo "${a:-full}" | tr -d ' -')
      timeout 120 build-$v/fp4moe bench $a --tokens 4096 16384 --no-graph --iters 5 > $L/pf-$v-$tag-$r.log 2>&1
      echo "pf $v $tag r$r ($(el)s): $(scripts/bench-summary $L/pf-$v-$tag-$r.log | cut -c1-200)"
    done
  done
done
for r in 1 2; do
  for v in base v6; do
    for a in "--tp 8" "--ep 8" ""; do
      [ $(el) -gt 530 ] && { echo "time guard: dec $v $a r$r skipped"; continue; }
      tag=$(echo "${a:-full}" | tr -d ' -')
      timeout 60 build-$v/fp4moe bench $a --tokens 8 64 512 --iters 20 > $L/dec-$v-$tag-$r.log 2>&1
      echo "dec $v $tag r$r ($(el)s): $(scripts/bench-summary $L/dec-$v-$tag-$r.log | cut -c1-200)"
    done
  done
done
