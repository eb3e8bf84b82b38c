#!/usr/bin/env bash
# Session 34 call 1 (session 33's next-call.sh as it was; the device tool gave an H100 although it asked for an H200): on an
# H200, d332725's kernels (build-sm90 at HEAD: the 32- and 64-token tiles' items at every multiple of 16 tokens)
# against 84b8f91 (build-b), alternated twice, at T=256, 512 and 1024 on TP8, EP8 and the full layer, with every
# block_m swept (the decode thresholds were fitted before that change: run_plan.h), then the GPU tests of HEAD.
# Here first: `FP4MOE_SKIP_WHEEL=1 scripts/gpu-build`; build-b/fp4moe is 84b8f91's CLI (git worktree add /tmp/b
# 84b8f91, build it the same way, copy its build-sm90/fp4moe to build-b/), then
#   tar czf .device/next.tgz build-sm90/fp4moe build-sm90/tests/fp4moe_gpu_tests build-b/fp4moe
# and run this with carry [".device/next.tgz"] (about 5 minutes on an H200).
set -uo pipefail
tar xzf .device/next.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in sm90 b; do
      timeout 80 build-$b/fp4moe bench "$@" --tokens 256 512 1024 --iters 20 > $L/dec-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens\|layer us by block_m: [^(]*\|timing the layer ([0-9.]* us)\|[0-9.]* us per pass' $L/dec-$b-$n-r$r.log | sed 's/: max tokens//; s/layer us by block_m: //; s/timing the layer (\([0-9.]*\) us)/med \1 |/; s/ us per pass/ chain/' | tr '\n' ' ')"
    done
  done
done
timeout 200 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $L/gpu-tests.log | head -5
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c | head -4
cd $OUT && tar czf logs.tgz logs
