#!/usr/bin/env bash
# Session 41, call 6: HEAD's build (the kernels of 48ada9f; .device/gpu.tgz from scripts/gpu-build at 880730c):
# scripts/gpu-suite's tests and nccl sections (every C++ GPU test, the unit tests, the one-rank NCCL tests).
# carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
FP4MOE_SUITE="tests nccl" TAIL=6 timeout 560 scripts/gpu-suite
echo "suite rc $?"
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
