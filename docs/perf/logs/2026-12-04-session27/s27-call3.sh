#!/usr/bin/env bash
# Session 27 call 3: a per-block %globaltimer timeline of the direct decode kernels (an experiment patch,
# FP4MOE_EXP_TIMELINE), with the stamp of down's weights landing; the layer's last single pass of each layer object.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
for a in "--tp 8 --tokens 1" "--tp 8 --tokens 2" "--ep 8 --tokens 1" "--ep 8 --tokens 3"; do
  tag=$(echo "$a" | tr -d ' -')
  FP4MOE_EXP_TIMELINE=1 timeout 90 build-t/fp4moe bench $a --iters 20 > $L/tl-$tag.log 2>&1
  echo "== $a rc $?"; scripts/bench-summary $L/tl-$tag.log | cut -c1-150; grep -A16 'timeline (' $L/tl-$tag.log | head -34
done
cd $OUT && tar czf logs.tgz logs
