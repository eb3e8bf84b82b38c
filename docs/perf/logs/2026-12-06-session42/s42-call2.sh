#!/usr/bin/env bash
# Session 42, call 2: the bad-input mends (77d3159; the MoE kernels as faed2e7's, the quantize kernel with its
# global-scale check). scripts/gpu-suite's tests and nccl sections (every C++ GPU and unit test, the one-rank NCCL tests), the Python tests against the source
# tree's package with the GPU test build's C ABI and CLI (no wheel: its two build-info checks expect the wheel's
# sm_120f kernels and fail here), then compute-sanitizer memcheck over the touched GPU tests.
# carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session42/s42-lib.sh
s42_suite 8 300
s42_pytest
# compute-sanitizer memcheck over the GPU tests this change touched
s42_memcheck 120 'QuantizeGpu.*:MoeLayerArgs.*:MoeGpu.ZeroTokensIsANoOp:MoeRobustness.EveryBad*' --leak-check full
s41_pack
