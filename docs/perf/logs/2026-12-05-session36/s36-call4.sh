#!/usr/bin/env bash
# Session 36 call 4: `bench --markdown` (9e7f799, 383a1b1) on a GPU. On an H200: scripts/gpu-suite's bench, shards
# and base sections with the shards' full T list, each bench writing its Markdown table (base: 84b8f91's CLI,
# alternated twice: d332725's H200 check); elsewhere: the TP8 and EP8 benches at T=1, 2, 16, 512 with --json and
# --markdown (the table checked against the JSON here). Here first: FP4MOE_SKIP_WHEEL=1 FP4MOE_BASE_BUILD=<84b8f91's
# CLI> scripts/gpu-build; carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
if grep -q H200 $OUT/smi.txt; then
  FP4MOE_SUITE="bench shards base" \
  FP4MOE_TOKENS="1 2 8 64 256 512 1024 2048 4096 8192 16384" \
  FP4MOE_SHARD_TOKENS="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" \
  FP4MOE_AB_SHAPES="full,--tp 8,--ep 8" FP4MOE_AB_TOKENS="256 512 1024" FP4MOE_AB_ROUNDS=2 TAIL=2 \
    timeout $((${FP4MOE_CALL_LIMIT:-585} - SECONDS)) scripts/gpu-suite
  echo "suite rc $? at $SECONDS s"
else
  mkdir -p $OUT/md
  for s in tp8 ep8; do
    build-sm90/fp4moe bench --${s:0:2} 8 --tokens 1 2 16 512 --iters 20 --json $OUT/md/$s.json --markdown $OUT/md/$s.md \
      > $OUT/md/$s.log 2>&1
    echo "$s rc $?"; cat $OUT/md/$s.md
  done
fi
# (the device tool brings back few files: one archive of everything)
cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
