#!/usr/bin/env bash
# Session 18 call 1: timeline of the direct decode kernels (globaltimer stamps per block), empty-kernel floors.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $L/smi.txt 2>&1
for sh in "--tp 8" "--ep 8"; do n=$(echo $sh | tr -d ' -')
  timeout 60 build-tl/fp4moe bench $sh --tokens 1 2 > $L/tl-$n.log 2>&1; echo "tl $n rc $?"
  grep -A40 "TIMELINE\|EMPTY" $L/tl-$n.log | grep -v "^  T=" | head -90
  awk '$1 ~ /^[0-9]+$/ && NF > 12 {printf "  T%s bm%s gu %s down %s layer %s graph %s\n", $1, $3, $6, $7, $8, $9}' $L/tl-$n.log
done
cd $OUT && tar czf logs.tgz logs
