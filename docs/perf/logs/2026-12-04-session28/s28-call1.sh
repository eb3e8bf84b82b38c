#!/usr/bin/env bash
# Prepared in session 28 (no device was lent): the direct kernels' hot lines. Binaries (built from 94738ea + the
# patches in docs/perf/logs/2026-12-04-session28/, packed in .device/bins28a.tgz):
#   build-base  94738ea (HEAD)                    build-v1  + variant-block-shared-routing.patch (both kernels)
#   build-v0    + ...-gate-up-only.patch          build-v3  + variant-down-rows-multicast.patch (v1 and, with
#   build-tl0   HEAD + the s27 timeline patch                 FP4MOE_EXP_DOWN_CLUSTER=n, down in clusters of n)
#   build-v7a   + variant-down-prefetch-later-batches.patch (down's later batches into L2 after its wait)
#   build-v7b   + variant-down-prefetch-later-batches-early.patch (the same before its wait)
#   build-c     + candidate-direct-hot-lines.patch (1 and 3 as they could land: the plan picks clusters of 2)
#   build-tl    v1 + the timeline (variant-block-shared-routing-timeline.patch)
#   build-tl3   v3 + the timeline (variant-down-rows-multicast-timeline.patch; run with FP4MOE_EXP_DOWN_CLUSTER=4)
# Run: bash .device/s28-call1.sh, carry [".device/bins28a.tgz", ".device/probe_hot_line", ".device/s28-call1.sh"]. About 6 minutes. (.device/ is ignored: on a fresh checkout,
# rebuild each binary with `git apply PATCH && cmake --build build-sm90 --target fp4moe_cli fp4moe_gpu_tests`, copy it
# into build-<name>/ (the tests into build-<name>/tests/), `git checkout kernels src`, pack them with
# `tar czf .device/bins28a.tgz build-v0 build-v1 build-v3 build-v7a build-v7b build-c build-base build-tl build-tl0 build-tl3`, and build the probe into
# .device/ as its first line says.)
set -uo pipefail
. scripts/gpu-env
tar xzf .device/bins28a.tgz
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
timeout 60 .device/probe_hot_line > $L/probe.log 2>&1; echo "probe rc $?"; cat $L/probe.log
FP4MOE_FUZZ_CASES=100 timeout 150 build-v1/tests/fp4moe_gpu_tests > $L/gpu-tests-v1.log 2>&1  # all of them (~70 s)
echo "gpu tests v1 rc $?"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v1.log | head -8
FP4MOE_EXP_DOWN_CLUSTER=4 FP4MOE_FUZZ_CASES=60 timeout 150 build-v3/tests/fp4moe_gpu_tests --gtest_filter='*Direct*' > $L/gpu-tests-v3c4.log 2>&1
echo "gpu tests v3 cluster 4 rc $?"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v3c4.log | head -8
FP4MOE_FUZZ_CASES=60 timeout 150 build-v7a/tests/fp4moe_gpu_tests --gtest_filter='*Direct*' > $L/gpu-tests-v7a.log 2>&1
echo "gpu tests v7a rc $?"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-v7a.log | head -8
FP4MOE_FUZZ_CASES=60 timeout 150 build-c/tests/fp4moe_gpu_tests --gtest_filter='*Direct*' > $L/gpu-tests-c.log 2>&1
echo "gpu tests candidate rc $?"; grep -E "^\[  (PASSED|FAILED)|tests ran" $L/gpu-tests-c.log | head -8
for r in 1 2; do
  for v in base v1 v0 v3c4 v3c2 v7a v7b; do
    bin=build-$v/fp4moe; envs=()
    case $v in v3c4) bin=build-v3/fp4moe; envs=(FP4MOE_EXP_DOWN_CLUSTER=4);; v3c2) bin=build-v3/fp4moe; envs=(FP4MOE_EXP_DOWN_CLUSTER=2);; esac
    for a in "--tp 8" "--ep 8"; do
      tag=$(echo "$a" | tr -d ' -')
      env "${envs[@]}" timeout 100 $bin bench $a --tokens 1 2 3 4 --iters 20 > $L/ab-$v-$tag-$r.log 2>&1
      echo "$v $tag r$r: $(scripts/bench-summary $L/ab-$v-$tag-$r.log | cut -c1-220)"
    done
  done
done
for v in tl0 tl tl3; do
  for a in "--tp 8 --tokens 1" "--tp 8 --tokens 2" "--ep 8 --tokens 1"; do
    tag=$(echo "$a" | tr -d ' -')
    envs=(); [ $v = tl3 ] && envs=(FP4MOE_EXP_DOWN_CLUSTER=4)
    env "${envs[@]}" FP4MOE_EXP_TIMELINE=1 timeout 90 build-$v/fp4moe bench $a --iters 20 > $L/tl-$v-$tag.log 2>&1
    echo "== $v $a"; grep -A16 'timeline (' $L/tl-$v-$tag.log | grep -E "routed|stored|landed|wait|end|start" | head -16
  done
done
cd $OUT && tar czf logs.tgz logs
