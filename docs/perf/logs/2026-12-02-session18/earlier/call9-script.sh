#!/usr/bin/env bash
# Session 18 call 9: the full layer, build-fc (the CTA-scope loads) against 6b85d85 (build-s18c), alternated twice,
# T=1 8 64 512 (call 8's single full-layer run of build-fc had T=64 at 1431 us).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
for round in 1 2; do
  for v in s18c fc; do
    timeout 80 build-$v/fp4moe bench --tokens 1 8 64 512 --iters 30 > $L/ab-$v-full-$round.log 2>&1
    echo "$v full r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-full-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-full-$round.log)"
  done
done
grep -h "measured:" $L/*.log | cut -c1-60
cd $OUT && tar czf logs.tgz logs
