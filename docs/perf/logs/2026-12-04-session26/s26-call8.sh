#!/usr/bin/env bash
# Session 26 call 8: EP8's T=8 chain, slower than its single pass: the chain on one workspace (as the bench does)
# against a workspace per pass (FP4MOE_EXP_CHAIN_WS, an experiment in the bench), alternated twice; TP8 T=8 beside.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
for r in 1 2; do
  for v in one per; do
    E=""; [ $v = per ] && E=FP4MOE_EXP_CHAIN_WS=1
    env $E timeout 60 build-x8/fp4moe bench --ep 8 --tokens 4 8 16 --iters 30 > $L/ep8-$v-$r.log 2>&1
    echo "ep8-$v$r rc $? $(scripts/bench-summary $L/ep8-$v-$r.log)"
    env $E timeout 60 build-x8/fp4moe bench --tp 8 --tokens 8 --iters 30 > $L/tp8-$v-$r.log 2>&1
    echo "tp8-$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
  done
done
cd $OUT && tar czf logs.tgz logs
