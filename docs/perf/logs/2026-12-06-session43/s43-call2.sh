#!/usr/bin/env bash
# Session 43, call 2: HEAD's tables on this call's GPU, each bench with its own read probe and cuBLAS bf16 8192^3 and
# the cuBLAS bf16 layer baseline in the same run: the GLM-5 TP8 and EP8 shards and the unsharded layer at the issues'
# decode and prefill T, at the layer's own pick. carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
S41_SMI_FIELDS=name,clocks.sm,clocks.mem,power.draw,temperature.gpu s41_start .device/gpu.tgz
for s in tp8 ep8 full; do
  a="--tp 8" lim=170; [ $s = ep8 ] && a="--ep 8"; [ $s = full ] && a="" lim=230
  # shellcheck disable=SC2086
  timeout $lim build-sm90/fp4moe bench $a --tokens 1 8 64 512 2048 4096 16384 \
    --json "$OUT/bench-$s.json" --markdown "$OUT/bench-$s.md" > "$OUT/bench-$s.log" 2>&1
  echo "bench $s rc $? [$SECONDS s]"; cat "$OUT/bench-$s.md"
done
s41_pack
