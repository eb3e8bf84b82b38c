#!/usr/bin/env bash
# Session 24 call 2 (three slots a warp, at most 32 pairs): GPU tests of the ring down kernel's build, then TP8 T=1..8 with it (default), with
# --no-direct-decode (the tiled down kernel and finalize after the same gate_up), and the session's start binary
# (build-rv, ee7210b's kernels), alternated twice; T=3 and 5 without the cluster kernel (ring down instead).
set -uo pipefail
B=${1:?usage: s24-call1.sh NEW_BUILD BASE_BUILD}
R=${2:?}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 240 $B/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure' $L/gpu-tests.log | head -20
grep -E '^direct down' $L/gpu-tests.log | head -3
for r in 1 2; do
  for v in ring tiled base; do
    f=""; b=$B
    [ $v = tiled ] && f=--no-direct-decode
    [ $v = base ] && b=$R
    timeout 110 $b/fp4moe bench --tp 8 --tokens 1 2 3 4 5 6 8 --iters 30 $f > $L/tp8-$v-$r.log 2>&1
    echo "$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
  done
done
for r in 1 2; do
  timeout 60 $B/fp4moe bench --tp 8 --tokens 3 --iters 30 --no-cluster-decode > $L/tp8-nocluster-$r.log 2>&1
  echo "nocluster$r rc $? $(scripts/bench-summary $L/tp8-nocluster-$r.log)"
  timeout 60 $B/fp4moe bench --tp 8 --tokens 3 --iters 30 --no-cluster-decode --no-direct-decode > $L/tp8-nocluster-tiled-$r.log 2>&1
  echo "nocluster-tiled$r rc $? $(scripts/bench-summary $L/tp8-nocluster-tiled-$r.log)"
done
for v in ring tiled; do
  f=""; [ $v = tiled ] && f=--no-direct-decode
  timeout 60 $B/fp4moe bench --shape 128,4096,192,8 --tokens 3 4 --iters 30 $f > $L/qwen-tp8-$v.log 2>&1
  echo "qwen-tp8-$v rc $? $(scripts/bench-summary $L/qwen-tp8-$v.log)"
done
cd $OUT && tar czf logs.tgz logs
