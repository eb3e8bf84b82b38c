#!/usr/bin/env bash
# Session 32, call 4: the 32- and 64-token warp-specialized tiles' items at every multiple of 16 tokens too
# (build-v2, variant-short-items-32-64.patch on 8c0ef49) against 8c0ef49's kernels (build-k): the variant's GPU tests,
# then T=512 (the 32-token tile) and 1024 (the 64-token tile) on TP8, EP8 and the full layer, alternated twice. On an
# H200 also 1842735 (build-k) against bce5f5e (build-h) at T=2048 and 3072, alternated twice.
# Carry [".device/bins-s32c4.tgz"]: build-v2/fp4moe, build-v2/tests/fp4moe_gpu_tests, build-k/fp4moe, build-h/fp4moe.
set -uo pipefail
tar xzf .device/bins-s32c4.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
timeout 170 build-v2/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $L/gpu-tests.log | head -5
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in v2 k; do
      timeout 60 build-$b/fp4moe bench "$@" --tokens 512 1024 --iters 20 > $L/dec-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens\|timing the layer ([0-9.]* us)\|[0-9.]* us per pass' $L/dec-$b-$n-r$r.log | sed 's/: max tokens//; s/timing the layer (\([0-9.]*\) us)/med \1/; s/ us per pass/ chain |/' | tr '\n' ' ')"
    done
  done
done
if grep -q H200 $L/smi.txt; then
  for r in 1 2; do
    for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
      set -- $s; n=$1; shift
      for b in k h; do
        timeout 60 build-$b/fp4moe bench "$@" --tokens 2048 3072 --block-m 64 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
        echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens.*layer us by block_m: bm64 [0-9]* bm128 [0-9]* (the layer picks [0-9]*)\|timing the layer ([0-9.]* us)' $L/pf-$b-$n-r$r.log | sed 's/: max tokens on one expert [0-9]*; layer us by block_m://; s/(the layer picks \([0-9]*\))/pick \1/; s/timing the layer (\([0-9.]*\) us)/med \1 |/' | tr '\n' ' ')"
        awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "  T%s bm%s layer %s cuBLAS %s x %s\n", $1, $3, $8, $16, $17}' $L/pf-$b-$n-r$r.log
      done
    done
  done
fi
grep -h "^measured" $L/*.log | cut -c1-120 | sort | uniq -c | head -4
cd $OUT && tar czf logs.tgz logs
