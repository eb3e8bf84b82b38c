#!/usr/bin/env bash
# Session 23 call 5: GPU tests of the cluster decode kernel and the whole suite, then the TP8 decode steps with it
# (default) and without it (--no-cluster-decode), alternated twice (it plans T=3 and 5; the others are controls), a
# DeepSeek-V3-like TP8 shard (--shape 256,7168,256,8) both ways, and the plans.
set -uo pipefail
B=${1:?usage: cluster-ab.sh BUILD_DIR}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv > $L/gpu.txt 2>&1
timeout 150 $B/fp4moe_gpu_tests --gtest_brief=1 --gtest_filter='*ClusterDecode*' > $L/gpu-tests-cluster.log 2>&1
echo "cluster tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests-cluster.log | tr '\n' ' ')"
grep -E 'FAILED|Failure|error|Expected|Which is|differ' $L/gpu-tests-cluster.log | cut -c1-330 | head -30
FP4MOE_FUZZ_CASES=100 timeout 240 $B/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
for r in 1 2; do
  timeout 100 $B/fp4moe bench --tp 8 --tokens 1 2 3 4 5 6 8 --iters 30 > $L/tp8-cluster-$r.log 2>&1
  echo "cluster$r rc $? $(scripts/bench-summary $L/tp8-cluster-$r.log)"
  timeout 100 $B/fp4moe bench --tp 8 --tokens 1 2 3 4 5 6 8 --iters 30 --no-cluster-decode > $L/tp8-tiled-$r.log 2>&1
  echo "tiled$r rc $? $(scripts/bench-summary $L/tp8-tiled-$r.log)"
done
timeout 80 $B/fp4moe bench --shape 256,7168,256,8 --tokens 3 5 --iters 30 > $L/dsv3-tp8-cluster.log 2>&1
echo "dsv3 cluster rc $? $(scripts/bench-summary $L/dsv3-tp8-cluster.log)"
timeout 80 $B/fp4moe bench --shape 256,7168,256,8 --tokens 3 5 --iters 30 --no-cluster-decode > $L/dsv3-tp8-tiled.log 2>&1
echo "dsv3 tiled rc $? $(scripts/bench-summary $L/dsv3-tp8-tiled.log)"
FP4MOE_PRINT_PLANS=1 timeout 60 $B/fp4moe bench --tp 8 --tokens 3 4 5 6 --iters 5 --no-graph 2>&1 | grep "fp4moe: MoeLayer" | grep -v "from the caller" | cut -c1-700 > $L/plans.log
sed 's/.*sm_90: //' $L/plans.log | cut -c1-330
cd $OUT && tar czf logs.tgz logs
