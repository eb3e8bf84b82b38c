#!/usr/bin/env bash
# Session 31, call 8: the direct down kernel's warps with a second chunk prefetch its weights into L2 at their start
# (variant-down-next-chunk-l2-prefetch.patch on 8c366c2, build-p): the GPU tests of the direct path, the shards and
# the robustness cases; the chained pass against 65de5c7 (build-n) alternated twice: GLM-5 TP8 T=1..4 and EP8
# T=1..3, Qwen3-235B TP8 T=1..2. Carry [".device/bins-s31f.tgz", ".device/s31-call8.sh"].
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins-s31f.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=40 timeout 120 build-p/fp4moe_gpu_tests --gtest_filter='MoeDirect.*:MoeShards.*:MoeRobustness.*:MoeGpu.*Fuzz*' > $L/gpu-tests-p.log 2>&1; echo "p gpu tests rc=$? ($(el)s): $(grep -h 'PASSED\|FAILED\|tests from .* ran' $L/gpu-tests-p.log | tr '\n' ' ')"
s() { grep -o 'T=[0-9]*: max\|[0-9.]* us per pass' "$1" | tr '\n' ' ' | sed 's/: max//g'; }
for r in 1 2; do
  for b in n p; do
    for a in "--tp 8 --tokens 1 2 3 4" "--ep 8 --tokens 1 2 3" "--model qwen3-235b --tp 8 --tokens 1 2"; do
      tag=$(echo "$a" | tr -d ' -' | cut -c1-12); timeout 60 build-$b/fp4moe bench $a --iters 20 > $L/dec-$b-$tag-$r.log 2>&1
      echo "$b r$r $tag ($(el)s): $(s $L/dec-$b-$tag-$r.log)"
    done
  done
done
