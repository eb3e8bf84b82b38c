#!/usr/bin/env bash
# Session 29 call 3: which launch's programmatic dependence slows the TP8 shard's prefill (the bench's "without
# programmatic launch" variant was 2-5% faster at T=4096/16384 in call 2). build-x = HEAD + experiment-pdl-off-mask.patch:
# FP4MOE_EXP_PDL_OFF bits turn it off per launch (1 count, 2 place, 4 gate_up, 8 down, 16 finalize).
# Binary: git apply experiment-pdl-off-mask.patch; cmake --build build-sm90 --target fp4moe_cli fp4moe_gpu_tests; copy
#   fp4moe and tests/fp4moe_gpu_tests into build-x/; tar czf .device/binsx.tgz build-x. Carry [".device/binsx.tgz", ".device/s29-call3.sh"].
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/binsx.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_EXP_PDL_OFF=31 FP4MOE_FUZZ_CASES=40 timeout 150 build-x/tests/fp4moe_gpu_tests > $L/gpu-tests-x31.log 2>&1
echo "gpu tests, every launch plain, rc $? at $(el)s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-x31.log | head -8
for r in 1 2; do
  for a in "--tp 8" "--ep 8"; do
    for m in 0 1 2 4 8 16 31; do
      tag=$(echo "$a" | tr -d ' -')
      FP4MOE_EXP_PDL_OFF=$m timeout 60 build-x/fp4moe bench $a --tokens 2048 4096 8192 16384 --block-m 64 128 --no-graph --iters 10 > $L/pf-$tag-m$m-$r.log 2>&1
      echo "$tag m$m r$r ($(el)s): $(grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)' $L/pf-$tag-m$m-$r.log | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g')"
    done
  done
done
for m in 0 1 2 4 8 16 31; do
  [ $(el) -gt 480 ] && { echo "time guard: full m$m skipped"; continue; }
  FP4MOE_EXP_PDL_OFF=$m timeout 60 build-x/fp4moe bench --tokens 4096 16384 --block-m 128 --no-graph --iters 5 > $L/pf-full-m$m.log 2>&1
  echo "full m$m ($(el)s): $(grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)' $L/pf-full-m$m.log | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g')"
done
for mdl in deepseek-v3 kimi-k2 qwen3-235b; do
  [ $(el) -gt 540 ] && { echo "time guard: $mdl skipped"; continue; }
  timeout 60 build-x/fp4moe bench --model $mdl --tp 8 --tokens 4096 16384 --block-m 128 --no-graph --iters 10 > $L/pf-$mdl-tp8.log 2>&1
  echo "$mdl tp8 ($(el)s): $(grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)' $L/pf-$mdl-tp8.log | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g')"
done
