#!/usr/bin/env bash
# Session 40, call 6: the committed build's tests that its last changes touch (the kernels are call 5's): the planner's
# kernel count and the tail kernel's GPU test, then the Python tests of the layer's options through the C ABI of that
# build (version 4: gate_up_tail). carry [".device/tl.tgz"] (build-tl: fp4moe_gpu_tests, python/libfp4moe_capi.so).
set -uo pipefail
tar xzf .device/tl.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/smi.txt
timeout 90 build-tl/tests/fp4moe_gpu_tests --gtest_filter='PlannerGpu.*:MoeShards.GateUpTail*' > $OUT/gpu-tests.log 2>&1
echo "gpu tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]|OK \]" $OUT/gpu-tests.log | head
PYBIN=python3; "$PYBIN" -c 'import torch' 2>/dev/null || PYBIN=/opt/torch/.venv/bin/python3
PYTHONPATH=python FP4MOE_CAPI_LIBRARY=$PWD/build-tl/python/libfp4moe_capi.so timeout 120 "$PYBIN" -m pytest -q -rs \
  -p no:cacheprovider python/tests/test_gpu.py -k "gate_up_tail or cluster_decode or direct_decode" > $OUT/py.log 2>&1
echo "pytest rc $?"; tail -5 $OUT/py.log
