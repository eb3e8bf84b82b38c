#!/usr/bin/env bash
# Prepared in session 40 for an H200 (not run): the shards' and the full layer's tables at HEAD, which has gate_up's
# tail kernel (the tables in shards.md are cb4a2eb's), with s40-land.sh's A/B against cb4a2eb's CLI and without the
# tail, and the shard GPU tests (session 40 strengthened the tail kernel's: tail on and off compared bit for bit; not
# run yet). Here first (done in session 40 at 095ebd9's code; redo if the code changed): cp <cb4a2eb's CLI>
# .device/fp4moe-cb4a2eb, then
#   FP4MOE_SKIP_WHEEL=1 FP4MOE_BASE_BUILD=.device/fp4moe-cb4a2eb scripts/gpu-build
# and run this with carry [".device/gpu.tgz"] (about 9 minutes on an H200; on an H100 the A/B and the tests only).
set -uo pipefail
ARCHIVES=.device/gpu.tgz NEW=build-sm90 BASE=build-base TEST_FILTER='MoeShards.*:PlannerGpu.*' PACK=0 \
  FP4MOE_CALL_LIMIT=240 bash docs/perf/logs/2026-12-06-session40/s40-land.sh
if grep -q H200 $OUT/smi.txt; then
  FP4MOE_SUITE="bench shards" \
  FP4MOE_TOKENS="1 2 8 64 256 512 1024 2048 4096 8192 16384" \
  FP4MOE_SHARD_TOKENS="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" TAIL=2 \
    timeout $((${FP4MOE_CALL_LIMIT:-585} - SECONDS)) scripts/gpu-suite
  echo "suite rc $? at $SECONDS s"
fi
cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
