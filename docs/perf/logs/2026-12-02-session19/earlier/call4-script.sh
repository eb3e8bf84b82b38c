#!/usr/bin/env bash
# Session 19 call 4: build-new (bitonic routing of up to 64 pairs in the GEMMs) against build-cur (c89c492), alternated
# twice: the full layer at T=1 2 with block_m 8 forced (call 3's bench took bm16 at T=1, a tie), TP8 and EP8 at
# T=3 16 64 (fused at 24 pairs; the 3-block config's larger layout at 128 and 512 pairs).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
for round in 1 2; do
  for v in cur new; do
    for s in "full --tokens 1 2 --block-m 8" "tp8 --tp 8 --tokens 3 16 64" "ep8 --ep 8 --tokens 3 16 64"; do
      set -- $s; n=$1; shift
      timeout 100 build-$v/fp4moe bench "$@" --iters 30 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s %s/%s", $1, $3, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
grep -h "measured:" $L/ab-*.log | cut -c1-60 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
