#!/usr/bin/env bash
# What the session-42 device scripts share (sourced by s42-callN.sh from the repository root on the device machine):
# unpacking the GPU test build with scripts/gpu-suite's tests and nccl sections, the Python tests against the source
# tree's package, compute-sanitizer memcheck over some GPU tests; packing $OUT is session 41's s41_pack. Checked with
# stub commands: each call script issues the commands it issued as run.
. docs/perf/logs/2026-12-06-session41/s41-lib.sh

# s42_suite TAIL SECONDS: unpack .device/gpu.tgz, run the suite's tests and nccl sections, put the toolkit's
# libraries on the path.
s42_suite() {
  tar xzf .device/gpu.tgz
  FP4MOE_SUITE="tests nccl" TAIL=$1 timeout "$2" scripts/gpu-suite
  echo "suite rc $? [$SECONDS s]"
  . scripts/gpu-env
}

# s42_pytest: the Python tests against the source tree's package with the GPU test build's C ABI and CLI (no wheel:
# its two build-info checks expect the wheel's sm_120f kernels and fail here).
s42_pytest() {
  PYBIN=python3
  "$PYBIN" -c 'import torch' 2>/dev/null || PYBIN=/opt/torch/.venv/bin/python3
  PYTHONPATH=python FP4MOE_CAPI_LIBRARY=build-sm90/python/libfp4moe_capi.so FP4MOE_CLI=build-sm90/fp4moe \
    timeout 150 "$PYBIN" -m pytest -q -rs -p no:cacheprovider python/tests > "$OUT/py-tests.log" 2>&1
  echo "pytest rc $? [$SECONDS s]"; tail -8 "$OUT/py-tests.log"
}

# s42_memcheck SECONDS FILTER [SANITIZER_ARGS...]: memcheck over the GPU tests matching FILTER, into $OUT/memcheck.log.
s42_memcheck() {
  local limit=$1 filter=$2 san
  shift 2
  san=/usr/local/cuda/bin/compute-sanitizer; [ -x "$san" ] || san=$(command -v compute-sanitizer)
  timeout "$limit" "$san" --tool memcheck "$@" build-sm90/tests/fp4moe_gpu_tests --gtest_filter="$filter" \
    > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc $? [$SECONDS s]"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -4
}
