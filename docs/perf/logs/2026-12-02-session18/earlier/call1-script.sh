#!/usr/bin/env bash
# Session 18 call 1: timeline of the direct decode kernels (globaltimer stamps per block), empty-kernel floors.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  ls "$d"/libcublas.so* >/dev/null 2>&1 && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" && break
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $L/smi.txt 2>&1
for sh in "--tp 8" "--ep 8"; do n=$(echo $sh | tr -d ' -')
  timeout 60 build-tl/fp4moe bench $sh --tokens 1 2 > $L/tl-$n.log 2>&1; echo "tl $n rc $?"
  grep -A40 "TIMELINE\|EMPTY" $L/tl-$n.log | grep -v "^  T=" | head -90
  awk '$1 ~ /^[0-9]+$/ && NF > 12 {printf "  T%s bm%s gu %s down %s layer %s graph %s\n", $1, $3, $6, $7, $8, $9}' $L/tl-$n.log
done
cd $OUT && tar czf logs.tgz logs
