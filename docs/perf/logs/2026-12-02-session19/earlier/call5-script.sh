#!/usr/bin/env bash
# Session 19 call 5: per-block %globaltimer timeline of the tiled decode kernels (gate_up, down, finalize) in the last
# pass of the 16-pass chain graph, on 386b733 + the debug patch (build-tl): TP8 and EP8 at T=4 8 16 64, the full layer at T=8.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
for s in "tp8 --tp 8 --tokens 4 8 16 64" "ep8 --ep 8 --tokens 4 8 16 64" "full --tokens 8"; do
  set -- $s; n=$1; shift
  timeout 100 build-tl/fp4moe bench "$@" --block-m 8 --iters 30 > $L/tl-$n.log 2>&1
  echo "== $n rc $?"; grep -A14 '^TIMELINE' $L/tl-$n.log; grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/tl-$n.log | sed 's/: max tokens.*://'
done
cd $OUT && tar czf logs.tgz logs
