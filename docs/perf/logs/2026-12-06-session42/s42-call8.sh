#!/usr/bin/env bash
# Session 42, call 8: HEAD's GPU test build (the dequantizer's error flags): scripts/gpu-suite's tests and nccl sections,
# then compute-sanitizer memcheck over the quantize tests. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session42/s42-lib.sh
s42_suite 6 330
s42_memcheck 150 'QuantizeGpu.*'
s41_pack
