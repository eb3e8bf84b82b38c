#!/usr/bin/env bash
# Session 18 call 3: the direct path's loops unrolled (build-v2: + the first-kernel PDL and direct down's early
# trigger; build-v3: the same without that trigger) against build-chain0 (fd103ed's kernels), alternated 3 times:
# TP8 / EP8 at T=1 2 8.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
for round in 1 2 3; do
  for v in chain0 v2 v3; do
    for sh in "--tp 8" "--ep 8"; do n=$(echo "x$sh" | tr -d ' -')
      timeout 60 build-$v/fp4moe bench $sh --tokens 1 2 8 --iters 50 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
cd $OUT && tar czf logs.tgz logs
