#!/usr/bin/env bash
# Session 26 call 2: the shards' full range on 38f6350's binary (build-x), one bench per shard, the layer's own plan
# at every T, every block_m and the per-T variants; JSON beside each log.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
T="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384"
for s in tp ep; do
  /usr/bin/time -f "%e s" timeout 280 build-x/fp4moe bench --${s} 8 --tokens $T --json $L/bench-${s}8.json > $L/bench-${s}8.log 2>&1
  echo "${s}8 rc $? $(tail -1 $L/bench-${s}8.log) $(scripts/bench-summary $L/bench-${s}8.log)"
done
cd $OUT && tar czf logs.tgz logs
