#!/usr/bin/env bash
# Session 31, call 4: HEAD's GPU tests and the wheel's (sm_90a + sm_120f, as users get it) pytest, the sm_120 configs
# from Python, the examples: scripts/gpu-suite's tests, nccl and python sections on scripts/gpu-build's binaries.
set -uo pipefail
tar xzf .device/suite-s31.tgz
FP4MOE_FUZZ_CASES=60 FP4MOE_SUITE="tests nccl python" timeout 500 scripts/gpu-suite > $OUT/suite.log 2>&1; echo "suite rc=$?"
cd $OUT && tar czf suite-logs.tgz logs suite.log 2>/dev/null; tail -25 $OUT/suite.log
