#!/usr/bin/env bash
# Session 23 call 6 (after the review's mends: one chunk per cluster, the plan's launch grid, the init query only with
# the option): GPU tests (the cluster test, then the whole suite), the wheel's pytest, TP8 T=3, 5 both ways once.
set -uo pipefail
B=${1:?usage: final.sh BUILD_DIR}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
timeout 150 $B/fp4moe_gpu_tests --gtest_brief=1 --gtest_filter='*ClusterDecode*' > $L/gpu-tests-cluster.log 2>&1
echo "cluster tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests-cluster.log | tr '\n' ' ')"
grep -E 'Failure|Expected|Which is|differ' $L/gpu-tests-cluster.log | cut -c1-300 | head -20
FP4MOE_FUZZ_CASES=100 timeout 240 $B/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
SITE=$OUT/site
python3 -m pip install -q --no-index --no-deps --target $SITE dist/fp4moe-*.whl > $L/py-install.log 2>&1
PYTHONPATH=$SITE timeout 200 python3 -m pytest -q -rs -p no:cacheprovider python/tests > $L/py-tests.log 2>&1
echo "pytest rc $? $(tail -1 $L/py-tests.log)"
grep -E 'FAILED|Error' $L/py-tests.log | head -10
for v in cluster tiled; do
  f=""; [ $v = tiled ] && f=--no-cluster-decode
  timeout 80 $B/fp4moe bench --tp 8 --tokens 3 5 --iters 30 $f > $L/tp8-$v.log 2>&1
  echo "$v rc $? $(scripts/bench-summary $L/tp8-$v.log)"
done
rm -rf $SITE
cd $OUT && tar czf logs.tgz logs
