#!/usr/bin/env bash
# Session 44, call 2: only on an H200 (it exits at once on any other GPU): the test of every preset's TP and EP shards
# and the tail-kernel test (the two that have run on H100s only), then the TP8 and EP8 shards' benches with the run's
# own read probe and cuBLAS bf16. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz
if ! grep -q H200 "$OUT/smi.txt"; then echo "not an H200: nothing run"; exit 0; fi
for s in "tp 8" "ep 8"; do
  n=${s/ /}
  timeout 40 build-sm90/fp4moe bench --$s --tokens 1 8 64 512 --markdown "$OUT/bench-$n.md" > "$OUT/bench-$n.log" 2>&1
  echo "bench $n rc $? [$SECONDS s]"; cat "$OUT/bench-$n.md"
done
timeout 260 build-sm90/tests/fp4moe_gpu_tests \
  --gtest_filter='MoeShards.EveryPresetShardMatchesTheReference:MoeShards.GateUpTail*' > "$OUT/gpu-tests.log" 2>&1
echo "tests rc $? [$SECONDS s]"; grep -E "preset shards|tests ran|PASSED|FAILED|SKIPPED" "$OUT/gpu-tests.log" | tail -6
s41_pack
