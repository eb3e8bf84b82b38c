#!/usr/bin/env bash
# Session 44, calls 3 and 4 (an H100 left warm by call 2, the session's last device time), as run from the repository
# root: compute-sanitizer memcheck over the tail-kernel test (call 3) and over the other shard and direct-path tests
# but the preset one (call 4). carry [".device/gpu.tgz"].
. docs/perf/logs/2026-12-06-session42/s42-lib.sh; tar xzf .device/gpu.tgz; . scripts/gpu-env
if [ "${1:-3}" = 3 ]; then
  s42_memcheck 170 'MoeShards.GateUpTail*'; cp "$OUT/memcheck.log" "$OUT/memcheck-tail.log"; rm "$OUT/memcheck.log"
else
  s42_memcheck 170 'MoeShards.*:MoeDirect.*:-MoeShards.EveryPreset*:MoeShards.GateUpTail*'
  mv "$OUT/memcheck.log" "$OUT/memcheck-shards.log"
fi
