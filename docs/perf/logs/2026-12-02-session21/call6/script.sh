#!/usr/bin/env bash
# Session 21 call 6: the prefill table (T=2048..16384, bm64 and bm128) of build-final (3ceac52's kernels) on TP8, EP8 and the
# full layer, alternated twice with build-base (16b50f9's kernels); then the full layer's decode T=1 8 64 512, the same A/B.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
pf() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s gu %s down %s layer %s TF %s cuBLAS %s x %s |", $1, $3, $6, $7, $8, $13, $16, $17}' "$1"; }
for r in 1 2; do
  for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
    set -- $s; n=$1; shift
    for b in final base; do
      timeout 120 build-$b/fp4moe bench "$@" --tokens 2048 3072 4096 8192 16384 --block-m 64 128 --no-graph --iters 5 > $L/pf-$b-$n-r$r.log 2>&1
      echo "pf $b $n r$r rc $? $(pf $L/pf-$b-$n-r$r.log)"
      grep -o 'T=[0-9]*: max tokens.*layer us by block_m: bm64 [0-9]* bm128 [0-9]*' $L/pf-$b-$n-r$r.log | sed 's/: max tokens on one expert [0-9]*; layer us by block_m://' | tr '\n' ' '; echo
    done
  done
done
for r in 1 2; do
  for b in final base; do
    timeout 100 build-$b/fp4moe bench --tokens 1 8 64 512 --iters 30 > $L/dec-$b-full-r$r.log 2>&1
    echo "dec $b full r$r rc $? $(scripts/bench-summary $L/dec-$b-full-r$r.log)"
  done
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
