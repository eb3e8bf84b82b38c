#!/usr/bin/env bash
# Session 30, call 2: the finalize after a prefill tile launched plain (build-n) against HEAD 45a08aa (build-x without
# FP4MOE_EXP_PDL_OFF: HEAD's launches), and the GPU tests of build-n. build-n's per-T note also times its finalize as a
# programmatic dependent ("finPDL") in the same rounds.
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins30.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=30 timeout 150 build-n/fp4moe_gpu_tests > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? ($(el)s): $(grep -h 'PASSED\|FAILED\|tests from .* ran' $L/gpu-tests.log | tr '\n' ' ')"
s() { grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)\|programmatic dependent too [0-9.]* us ([-+0-9.%]*)' "$1" | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g; s/programmatic dependent too/finPDL/g'; }
b_() { local b=$1 tag=$2; shift 2; timeout 90 build-$b/fp4moe bench "$@" --no-graph > $L/$tag-$b.log 2>&1; echo "$b $tag ($(el)s): $(s $L/$tag-$b.log)"; }
for r in 1 2; do
  for b in n x; do
    b_ $b pf-tp8-$r --tp 8 --tokens 1024 2048 4096 8192 16384 --block-m 64 128 --iters 10
    [ $r = 1 ] && b_ $b pf-ep8 --ep 8 --tokens 1024 2048 4096 8192 16384 --block-m 64 128 --iters 10
  done
done
b_ n pf-dsv3-tp8 --model deepseek-v3 --tp 8 --tokens 2048 4096 16384 --block-m 64 128 --iters 10
b_ n pf-qwen-tp8 --model qwen3-235b --tp 8 --tokens 2048 4096 16384 --block-m 64 --iters 10
b_ n pf-full --tokens 2048 4096 16384 --block-m 64 128 --iters 5
for b in n x; do
  timeout 60 build-$b/fp4moe bench --tp 8 --tokens 8 64 512 --iters 20 > $L/dec-tp8-$b.log 2>&1
  echo "$b decode tp8 ($(el)s): $(grep -o 'T=[0-9]*: max\|[0-9.]* us per pass' $L/dec-tp8-$b.log | tr '\n' ' ')"
done
