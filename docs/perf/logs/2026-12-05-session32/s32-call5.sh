#!/usr/bin/env bash
# Session 32, call 5: on an H200, 1842735 (build-k) against bce5f5e (build-h) at T=2048 and 3072 on TP8, EP8 and the
# full layer, alternated twice; then compute-sanitizer memcheck and initcheck over the 128-token tile's test (every
# item width against the reference) and the wgmma shapes' test, on 1507d12's GPU test build (the kernels of 1842735).
# Carry [".device/bins-s32c5.tgz"]: build-sm90/tests/fp4moe_gpu_tests, build-k/fp4moe, build-h/fp4moe.
set -uo pipefail
tar xzf .device/bins-s32c5.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
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
  grep -h "^measured" $L/*.log | cut -c1-120 | sort | uniq -c | head -4
fi
for tool in memcheck initcheck; do
  timeout 110 compute-sanitizer --tool $tool --error-exitcode 99 build-sm90/tests/fp4moe_gpu_tests \
    --gtest_filter='MoeGpu.PrefillTileMatchesTheReference:WgmmaGpu.*' --gtest_brief=1 > $L/sanitize-$tool.log 2>&1
  echo "$tool rc $? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' $L/sanitize-$tool.log | tr -s ' ' | tr '\n' ' ')"
done
cd $OUT && tar czf logs.tgz logs
