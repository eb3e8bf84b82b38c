#!/usr/bin/env bash
# Session 31, call 3: the direct path's down by the ring kernel where a warp has more than one chunk (TP shards at
# T=2..4 on the direct path; experiment-direct-down-ring.patch on 65de5c7, switched by FP4MOE_EXP_DOWN_RING): the GPU
# tests of the direct path with it on; the chained pass with it on and off (same binary, build-r) and 65de5c7 (build-n),
# alternated twice, on GLM-5 TP8, DeepSeek-V3 TP8 and Qwen3-235B TP8 at T=1 (control) and T=2.
# Carry [".device/bins-s31d.tgz", ".device/s31-call3.sh"]; about 3 minutes.
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins-s31d.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_EXP_DOWN_RING=1 FP4MOE_FUZZ_CASES=60 timeout 150 build-r/fp4moe_gpu_tests > $L/gpu-tests-ring.log 2>&1; echo "ring gpu tests rc=$? ($(el)s): $(grep -h 'PASSED\|FAILED\|tests from .* ran' $L/gpu-tests-ring.log | tr '\n' ' ')"
s() { grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|[0-9.]* us per pass' "$1" | tr '\n' ' ' | sed 's/: max//g'; }
for r in 1 2; do
  for v in n r0 r1; do
    b=build-${v:0:1}; env=""; [ $v = r1 ] && env="FP4MOE_EXP_DOWN_RING=1"
    for m in glm5 deepseek-v3 qwen3-235b; do
      log=$L/dec-$v-$m-$r.log
      env $env timeout 60 $b/fp4moe bench --model $m --tp 8 --tokens 1 2 --iters 20 > $log 2>&1
      echo "$v r$r $m ($(el)s): $(s $log)"
    done
  done
done
