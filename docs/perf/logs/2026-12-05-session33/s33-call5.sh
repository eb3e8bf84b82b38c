#!/usr/bin/env bash
# Session 33 call 5: where call 4's change moves time, phase by phase, at fixed tiles: 84b8f91 (build-b), call 4's
# binary (build-v: the 32- and 64-token tiles' items at every multiple of 16 tokens, but the bf16-partial 32-token
# kernel) and build-c (the same for the down kernels only: the 32- and 64-token SwiGLU kernels keep whole-tile
# items). TP8 T=512 at block_m 32 with fp32 and with bf16 partials, TP8 and the full layer at T=1024 at block_m 64; the three binaries alternated twice. The bench's table has gate_up and down timed alone.
# Carry [".device/s33c5.tgz"]: build-b/fp4moe, build-v/fp4moe, build-c/fp4moe.
set -uo pipefail
tar xzf .device/s33c5.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
for r in 1 2; do
  for s in "tp8-512 --tp 8 --tokens 512 --block-m 32" "tp8bf-512 --tp 8 --tokens 512 --block-m 32 --finalize deterministic-bf16" \
           "tp8-1024 --tp 8 --tokens 1024 --block-m 64" "full-1024 --tokens 1024 --block-m 64"; do
    set -- $s; n=$1; shift
    for b in b v c; do
      timeout 60 build-$b/fp4moe bench "$@" --iters 20 > $L/ph-$b-$n-r$r.log 2>&1
      echo "$b $n r$r rc $? $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "bm%s gu %s down %s layer %s graph %s", $3, $6, $7, $8, $9}' $L/ph-$b-$n-r$r.log) $(grep -o '[0-9.]* us per pass' $L/ph-$b-$n-r$r.log)"
    done
  done
done
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c | head -3
cd $OUT && tar czf logs.tgz logs
