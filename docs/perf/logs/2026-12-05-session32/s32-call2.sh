#!/usr/bin/env bash
# Session 32, call 2: the change with its plan rule (the 128-token tile from T=2048 on GLM-5; its items at every
# multiple of 16 tokens): scripts/gpu-suite's tests, nccl and python sections on scripts/gpu-build's binaries and
# wheel, then the prefill range of TP8, EP8 and the full layer at --block-m 64 128 against bce5f5e's binary
# (build-h), alternated twice.
# Carry [".device/suite-s32.tgz"]: build-sm90/{fp4moe,fp4moe_bench_quantize,tests/fp4moe_*_tests,
# python/libfp4moe_capi.so}, dist/*.whl, build-h/fp4moe.
set -uo pipefail
tar xzf .device/suite-s32.tgz
FP4MOE_FUZZ_CASES=60 FP4MOE_SUITE="tests nccl python" timeout 300 scripts/gpu-suite > $OUT/suite.log 2>&1; echo "suite rc=$?"
grep -A14 "^=== summary" $OUT/suite.log
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in sm90 h; do
      timeout 60 build-$b/fp4moe bench "$@" --tokens 2048 3072 4096 16384 --block-m 64 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens.*layer us by block_m: bm64 [0-9]* bm128 [0-9]* (the layer picks [0-9]*)\|timing the layer ([0-9.]* us)' $L/pf-$b-$n-r$r.log | sed 's/: max tokens on one expert [0-9]*; layer us by block_m://; s/(the layer picks \([0-9]*\))/pick \1/; s/timing the layer (\([0-9.]*\) us)/med \1 |/' | tr '\n' ' ')"
    done
  done
done
grep -h "^measured" $L/*.log | cut -c1-120 | sort | uniq -c | head -4
cd $OUT && tar czf logs.tgz logs suite.log gpu-suite-logs.tgz 2>/dev/null
