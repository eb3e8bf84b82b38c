#!/usr/bin/env bash
# Session 21 call 7: the full layer's prefill gate_up at T=2048 3072 4096 (bm64, bm128): build-base (16b50f9), build-v1
# (the fp32 partial-store change alone) and build-final (3ceac52: that and the SwiGLU store), alternated twice.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
pf() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s gu %s down %s layer %s |", $1, $3, $6, $7, $8}' "$1"; }
for r in 1 2; do
  for b in base v1 final; do
    timeout 120 build-$b/fp4moe bench --tokens 2048 3072 4096 --block-m 64 128 --no-graph --iters 5 > $L/pf-$b-full-r$r.log 2>&1
    echo "pf $b full r$r rc $? $(pf $L/pf-$b-full-r$r.log)"
    grep -o 'T=[0-9]*: max tokens.*layer us by block_m: bm64 [0-9]* bm128 [0-9]*' $L/pf-$b-full-r$r.log | sed 's/: max tokens on one expert [0-9]*; layer us by block_m://' | tr '\n' ' '; echo
  done
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
