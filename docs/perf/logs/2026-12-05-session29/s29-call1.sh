#!/usr/bin/env bash
# Session 29 call 1: session 28's prepared direct-path variants (its s28-call1.sh, which this replaces: git keeps it),
# with the candidate (build-c) benched in place of v3 at clusters of 2 and all of its GPU tests run, a time guard.
# Binaries: build-variants.sh base v1 c v0 v3 v7a v7b tl0 tl tl3, then
#   tar czf .device/bins29a.tgz build-base/fp4moe build-v1 build-c build-v0/fp4moe build-v3 build-v7a build-v7b/fp4moe build-tl0/fp4moe build-tl/fp4moe build-tl3/fp4moe
# Run: carry [".device/bins29a.tgz", ".device/probe_hot_line", ".device/s29-call1.sh"] (the probe: nvcc -O3 -arch=sm_90a -std=c++17
#   docs/perf/logs/2026-12-04-session28/probe_hot_line.cu -o .device/probe_hot_line), bash .device/s29-call1.sh.
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins29a.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
timeout 60 .device/probe_hot_line > $L/probe.log 2>&1; echo "probe rc $? at $(el)s"; cat $L/probe.log
FP4MOE_FUZZ_CASES=60 timeout 150 build-v1/tests/fp4moe_gpu_tests > $L/gpu-tests-v1.log 2>&1
echo "gpu tests v1 rc $? at $(el)s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v1.log | head -8
FP4MOE_FUZZ_CASES=60 timeout 150 build-c/tests/fp4moe_gpu_tests > $L/gpu-tests-c.log 2>&1
echo "gpu tests candidate rc $? at $(el)s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-c.log | head -8
FP4MOE_EXP_DOWN_CLUSTER=4 FP4MOE_FUZZ_CASES=30 timeout 100 build-v3/tests/fp4moe_gpu_tests --gtest_filter='*Direct*' > $L/gpu-tests-v3c4.log 2>&1
echo "gpu tests v3 cluster 4 rc $? at $(el)s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v3c4.log | head -8
FP4MOE_FUZZ_CASES=30 timeout 100 build-v7a/tests/fp4moe_gpu_tests --gtest_filter='*Direct*' > $L/gpu-tests-v7a.log 2>&1
echo "gpu tests v7a rc $? at $(el)s"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v7a.log | head -8
for r in 1 2; do
  for v in base v1 c v0 v3c4 v7a v7b; do
    bin=build-$v/fp4moe; envs=()
    case $v in v3c4) bin=build-v3/fp4moe; envs=(FP4MOE_EXP_DOWN_CLUSTER=4);; esac
    for a in "--tp 8" "--ep 8"; do
      tag=$(echo "$a" | tr -d ' -')
      env "${envs[@]}" timeout 60 $bin bench $a --tokens 1 2 3 4 --iters 20 > $L/ab-$v-$tag-$r.log 2>&1
      echo "$v $tag r$r ($(el)s): $(scripts/bench-summary $L/ab-$v-$tag-$r.log | cut -c1-200)"
    done
  done
done
for v in tl0 tl tl3; do
  for a in "--tp 8 --tokens 1" "--ep 8 --tokens 1" "--tp 8 --tokens 2"; do
    [ $(el) -gt 540 ] && { echo "time guard: timeline $v $a skipped"; continue; }
    tag=$(echo "$a" | tr -d ' -')
    envs=(); [ $v = tl3 ] && envs=(FP4MOE_EXP_DOWN_CLUSTER=4)
    env "${envs[@]}" FP4MOE_EXP_TIMELINE=1 timeout 40 build-$v/fp4moe bench $a --iters 20 > $L/tl-$v-$tag.log 2>&1
    echo "== $v $a ($(el)s)"; grep -A16 'timeline (' $L/tl-$v-$tag.log | grep -E "routed|stored|landed|wait|end|start" | head -16
  done
done
