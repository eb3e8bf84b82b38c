#!/usr/bin/env bash
# Session 27 call 5: build-q (42f27b3 + each direct gate_up block prefetching its share of down's weights into L2 once
# its own last weights have landed) against build-n (42f27b3's direct kernels), alternated three times, on the direct
# path's steps; the timeline is not in either binary.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
run() { local tag=$1 builds=$2; shift 2; for v in $builds; do
  timeout 120 build-$v/fp4moe bench "$@" --iters 20 > $L/$tag-$v.log 2>&1; echo "$tag-$v rc $? t=$SECONDS $(scripts/bench-summary $L/$tag-$v.log | cut -c1-150)"; done; }
for r in 1 2 3; do
  run tp8-r$r "n q" --tp 8 --tokens 1 2
  run ep8-r$r "n q" --ep 8 --tokens 1 2 3
done
run qwtp8 "n q" --model qwen3-235b --tp 8 --tokens 1 2
run qwep8 "n q" --model qwen3-235b --ep 8 --tokens 1 2 3
cd $OUT && tar czf logs.tgz logs
