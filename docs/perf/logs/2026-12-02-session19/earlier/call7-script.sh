#!/usr/bin/env bash
# Session 19 call 7: the full layer at T=64 and 512, build-new against build-cur (c89c492), alternated three times
# (call 6's single run of build-new had T=64 at 1148.2 us against the eighteenth session's 1118.1).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
for round in 1 2 3; do
  for v in cur new; do
    timeout 100 build-$v/fp4moe bench --tokens 64 512 --iters 30 > $L/ab-$v-full-$round.log 2>&1
    echo "$v full r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-full-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s %s/%s", $1, $3, $8, $9}' $L/ab-$v-full-$round.log)"
  done
done
grep -h "measured:" $L/*.log | cut -c1-60 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
