#!/usr/bin/env bash
# Session 26 call 1: the review mends' binary (38f6350, build-x) -- GPU tests, the wheel's pytest, then the decode
# steps against 1b5c326's binary (build-b, before de21abc's shared down layout) alternated twice: TP8 T=1..8, EP8
# T=1..8; the full layer T=1, 2, 8 and Qwen3-235B's TP8 shape T=1..4 once each.
set -uo pipefail
N=build-x; B=build-b
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=100 timeout 200 $N/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure|skipped \(' $L/gpu-tests.log | head -10
SITE=$OUT/site
python3 -m pip install -q --no-index --no-deps --target $SITE dist/fp4moe-*.whl > $L/py-install.log 2>&1
PYTHONPATH=$SITE timeout 200 python3 -m pytest -q -rs -p no:cacheprovider python/tests > $L/py-tests.log 2>&1
echo "pytest rc $? $(tail -1 $L/py-tests.log)"
grep -E 'FAILED|Error' $L/py-tests.log | head -10
rm -rf $SITE
for r in 1 2; do
  for v in new base; do
    b=$N; [ $v = base ] && b=$B
    timeout 90 $b/fp4moe bench --tp 8 --tokens 1 2 3 4 5 6 8 --iters 30 > $L/tp8-$v-$r.log 2>&1
    echo "tp8-$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
    timeout 60 $b/fp4moe bench --ep 8 --tokens 1 2 4 8 --iters 30 > $L/ep8-$v-$r.log 2>&1
    echo "ep8-$v$r rc $? $(scripts/bench-summary $L/ep8-$v-$r.log)"
  done
done
for v in new base; do
  b=$N; [ $v = base ] && b=$B
  timeout 90 $b/fp4moe bench --tokens 1 2 8 --iters 30 > $L/full-$v.log 2>&1
  echo "full-$v rc $? $(scripts/bench-summary $L/full-$v.log)"
  timeout 60 $b/fp4moe bench --shape 128,4096,192,8 --tokens 1 2 3 4 --iters 30 > $L/qwen-tp8-$v.log 2>&1
  echo "qwen-tp8-$v rc $? $(scripts/bench-summary $L/qwen-tp8-$v.log)"
done
cd $OUT && tar czf logs.tgz logs
