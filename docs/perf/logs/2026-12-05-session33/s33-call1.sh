#!/usr/bin/env bash
# Session 33 call 1 (prepared in session 32 as next-call.sh; decode rows added): the GPU tests
# of 84b8f91 (4d2ec2f's GPU test changes: the prefill tile's multi-item case and the NaN-started wgmma test were never run), then, on an H200, the
# 128-token tile change (build-sm90 at 4d2ec2f; its kernels are 1842735's) against bce5f5e (build-h) at T=2048 and
# 3072 on TP8, EP8 and the full layer, alternated twice: the H200 numbers prefill.md's "Since" section still lacks.
# Here first: `FP4MOE_SKIP_WHEEL=1 scripts/gpu-build` (build-h/fp4moe is bce5f5e's CLI: git worktree add /tmp/h bce5f5e,
# build it the same way, copy its build-sm90/fp4moe to build-h/), then
#   tar czf .device/next.tgz build-sm90/fp4moe build-sm90/tests/fp4moe_gpu_tests build-h/fp4moe
# and run this with carry [".device/next.tgz"].
set -uo pipefail
tar xzf .device/next.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
timeout 200 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $L/gpu-tests.log | head -5
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in sm90 h; do
      timeout 60 build-$b/fp4moe bench "$@" --tokens 2048 3072 --block-m 64 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens.*layer us by block_m: bm64 [0-9]* bm128 [0-9]* (the layer picks [0-9]*)\|timing the layer ([0-9.]* us)' $L/pf-$b-$n-r$r.log | sed 's/: max tokens on one expert [0-9]*; layer us by block_m://; s/(the layer picks \([0-9]*\))/pick \1/; s/timing the layer (\([0-9.]*\) us)/med \1 |/' | tr '\n' ' ')"
      awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "  T%s bm%s layer %s cuBLAS %s x %s\n", $1, $3, $8, $16, $17}' $L/pf-$b-$n-r$r.log
    done
  done
done
for s in "tp8 --tp 8" "ep8 --ep 8"; do
  set -- $s; n=$1; shift
  timeout 90 build-sm90/fp4moe bench "$@" --tokens 1 8 64 512 > $L/dec-$n.log 2>&1
  echo "decode $n rc $? $(scripts/bench-summary $L/dec-$n.log 2>/dev/null | tr '\n' ' ' | cut -c1-600)"
done
grep -h "^measured" $L/*.log | cut -c1-120 | sort | uniq -c | head -4
cd $OUT && tar czf logs.tgz logs
