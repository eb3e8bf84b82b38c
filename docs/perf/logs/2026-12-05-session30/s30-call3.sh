#!/usr/bin/env bash
# Session 30, call 3: the final rule (the finalize plain after a prefill tile only where I <= 256) -- build-n -- its GPU
# tests, and TP8 / EP8 / full-layer prefill against HEAD 45a08aa's launches (build-x, no FP4MOE_EXP_PDL_OFF).
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins30b.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=30 timeout 150 build-n/fp4moe_gpu_tests > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? ($(el)s): $(grep -h 'PASSED\|FAILED\|tests from .* ran' $L/gpu-tests.log | tr '\n' ' ')"
s() { grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)\|programmatic dependent too [0-9.]* us ([-+0-9.%]*)' "$1" | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g; s/programmatic dependent too/finPDL/g'; }
b_() { local b=$1 tag=$2; shift 2; timeout 90 build-$b/fp4moe bench "$@" --no-graph > $L/$tag-$b.log 2>&1; echo "$b $tag ($(el)s): $(s $L/$tag-$b.log)"; }
for r in 1; do
  for b in n x; do b_ $b pf-tp8-$r --tp 8 --tokens 2048 4096 8192 16384 --block-m 64 128 --iters 10; done
done

