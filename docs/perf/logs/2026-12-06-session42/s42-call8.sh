#!/usr/bin/env bash
# Session 42, call 8: HEAD's GPU test build (the dequantizer's error flags): scripts/gpu-suite's tests and nccl sections,
# then compute-sanitizer memcheck over the quantize tests. carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
FP4MOE_SUITE="tests nccl" TAIL=6 timeout 330 scripts/gpu-suite
echo "suite rc $? [$SECONDS s]"
. scripts/gpu-env
SAN=/usr/local/cuda/bin/compute-sanitizer; [ -x "$SAN" ] || SAN=$(command -v compute-sanitizer)
timeout 150 "$SAN" --tool memcheck build-sm90/tests/fp4moe_gpu_tests --gtest_filter='QuantizeGpu.*' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $? [$SECONDS s]"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -4
cd "$OUT" && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
