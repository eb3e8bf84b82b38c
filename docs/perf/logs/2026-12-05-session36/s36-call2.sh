#!/usr/bin/env bash
# Session 36 call 2: scripts/gpu-suite's tests, nccl, python and sanitize sections on HEAD's build (the rest of the
# suite is call 1). Here first: FP4MOE_BASE_BUILD=<84b8f91's CLI> scripts/gpu-build; carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
FP4MOE_SUITE="${FP4MOE_SUITE:-tests nccl python sanitize}" TAIL=3 timeout $((585 - SECONDS)) scripts/gpu-suite
echo "suite rc $? at $SECONDS s"
# (the device tool brings back few files: one archive of everything)
cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
