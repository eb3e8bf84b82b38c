#!/usr/bin/env bash
# Session 27 call 8: the bench's new per-routing-set single-pass graph times (mean, least, most) beside the chain, on
# the shards' T=4..16 (EP8's chain at T=8 above its single pass: the hypothesis that the chain is a mean over sets).
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
for a in "--ep 8" "--tp 8"; do
  tag=$(echo "$a" | tr -d ' -')
  timeout 200 build-s/fp4moe bench $a --tokens 2 4 8 16 64 --json $L/bench-$tag.json > $L/bench-$tag.log 2>&1
  echo "== $a rc $?"; scripts/bench-summary $L/bench-$tag.log | cut -c1-200
  grep -o 'T=[0-9]*: max tokens on one expert [0-9]*\|[0-9]* passes in one CUDA graph[^;]*\|each routing set[^;]*' $L/bench-$tag.log
done
cd $OUT && tar czf logs.tgz logs
