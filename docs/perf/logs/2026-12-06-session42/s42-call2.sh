#!/usr/bin/env bash
# Session 42, call 2: the bad-input mends (77d3159; the MoE kernels as faed2e7's, the quantize kernel with its
# global-scale check). scripts/gpu-suite's tests and nccl sections (every C++ GPU and unit test, the one-rank NCCL tests), the Python tests against the source
# tree's package with the GPU test build's C ABI and CLI (no wheel: its two build-info checks expect the wheel's
# sm_120f kernels and fail here), then compute-sanitizer memcheck over the touched GPU tests.
# carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
FP4MOE_SUITE="tests nccl" TAIL=8 timeout 300 scripts/gpu-suite
echo "suite rc $? [$SECONDS s]"
. scripts/gpu-env
PYBIN=python3
"$PYBIN" -c 'import torch' 2>/dev/null || PYBIN=/opt/torch/.venv/bin/python3
PYTHONPATH=python FP4MOE_CAPI_LIBRARY=build-sm90/python/libfp4moe_capi.so FP4MOE_CLI=build-sm90/fp4moe \
  timeout 150 "$PYBIN" -m pytest -q -rs -p no:cacheprovider python/tests > "$OUT/py-tests.log" 2>&1
echo "pytest rc $? [$SECONDS s]"; tail -8 "$OUT/py-tests.log"
# compute-sanitizer memcheck over the GPU tests this change touched
SAN=/usr/local/cuda/bin/compute-sanitizer; [ -x "$SAN" ] || SAN=$(command -v compute-sanitizer)
timeout 120 "$SAN" --tool memcheck --leak-check full build-sm90/tests/fp4moe_gpu_tests \
  --gtest_filter='QuantizeGpu.*:MoeLayerArgs.*:MoeGpu.ZeroTokensIsANoOp:MoeRobustness.EveryBad*' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? [$SECONDS s]"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -4
cd "$OUT" && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
