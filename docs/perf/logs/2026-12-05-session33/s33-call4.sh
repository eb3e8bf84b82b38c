#!/usr/bin/env bash
# Session 33 call 4: the 32- and 64-token tiles' items at every multiple of 16 tokens (build-sm90: call 3's form with
# the bf16-partial 32-token kernel's producer not copying the first rows either: its SASS is 84b8f91's, as call 3's
# bf16 partials were 2-3% slower on TP8) against 84b8f91 (build-b): the GPU tests of build-sm90, then T=512 and 1024 on TP8, EP8 and the full
# layer, alternated twice (the per-T note also times bf16 partials).
# Carry [".device/s33c4.tgz"]: build-sm90/fp4moe, build-sm90/tests/fp4moe_gpu_tests, build-b/fp4moe.
set -uo pipefail
tar xzf .device/s33c4.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
/usr/bin/time -f "%e s" timeout 280 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ') $(tail -1 $L/gpu-tests.log)"
grep -E "^\[  FAILED|Failure" $L/gpu-tests.log | head -5
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in sm90 b; do
      timeout 80 build-$b/fp4moe bench "$@" --tokens 512 1024 --iters 20 > $L/dec-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens\|layer us by block_m: [^(]*\|timing the layer ([0-9.]* us)\|[0-9.]* us per pass\|bf16 partials [0-9.]* us' $L/dec-$b-$n-r$r.log | sed 's/: max tokens//; s/layer us by block_m: //; s/timing the layer (\([0-9.]*\) us)/med \1/; s/ us per pass/ chain/; s/bf16 partials \([0-9.]*\) us/bf16p \1 |/' | tr '\n' ' ')"
    done
  done
done
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c | head -4
cd $OUT && tar czf logs.tgz logs
