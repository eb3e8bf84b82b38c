#!/usr/bin/env bash
# Session 19 call 8: the per-block timeline of the tiled kernels, stream-launched (the layer's timing loop, last pass)
# against the 16-pass chain graph (last pass), full layer and TP8 at T=64, bm8 (why the unsharded layer's graph is slower).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
for s in "full --tokens 64" "tp8 --tp 8 --tokens 64" "full8 --tokens 8"; do
  set -- $s; n=$1; shift
  timeout 100 build-tl/fp4moe bench "$@" --block-m 8 --iters 30 > $L/tl-$n.log 2>&1
  echo "== $n rc $?"; grep -A14 '^TIMELINE' $L/tl-$n.log | grep -v 'items per block'; grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/tl-$n.log | sed 's/: max tokens.*://'; awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s layer %s graph %s\n", $1, $3, $8, $9}' $L/tl-$n.log
done
cd $OUT && tar czf logs.tgz logs
