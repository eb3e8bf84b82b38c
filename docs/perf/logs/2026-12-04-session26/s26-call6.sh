#!/usr/bin/env bash
# Session 26 call 6: the final binary (4706943, build-x6) -- GPU tests, the wheel's pytest, and the decode steps of 1-4
# tokens on both shards once (the same-run probe and cuBLAS in each log).
set -uo pipefail
. scripts/gpu-env
N=build-x6
L=$OUT/logs; mkdir -p $L
FP4MOE_FUZZ_CASES=100 timeout 200 $N/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(tail -3 $L/gpu-tests.log | tr '\n' ' ')"
grep -E 'FAILED|Failure' -A6 $L/gpu-tests.log | head -20
SITE=$OUT/site
python3 -m pip install -q --no-index --no-deps --target $SITE dist/fp4moe-*.whl > $L/py-install.log 2>&1
PYTHONPATH=$SITE timeout 200 python3 -m pytest -q -rs -p no:cacheprovider python/tests > $L/py-tests.log 2>&1
echo "pytest rc $? $(tail -1 $L/py-tests.log)"
grep -E 'FAILED|Error' $L/py-tests.log | head -10
rm -rf $SITE
for s in tp ep; do
  timeout 60 $N/fp4moe bench --${s} 8 --tokens 1 2 3 4 --iters 30 > $L/${s}8.log 2>&1
  echo "${s}8 rc $? $(scripts/bench-summary $L/${s}8.log)"
done
cd $OUT && tar czf logs.tgz logs
