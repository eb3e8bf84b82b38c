#!/usr/bin/env bash
# Session 18 call 4: timeline of the direct decode kernels at HEAD (6b85d85 + globaltimer stamps, build-tl2): single-pass
# graph and 16-pass chain graph; empty-graph floors.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  ls "$d"/libcublas.so* >/dev/null 2>&1 && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" && break
done
for sh in "--tp 8" "--ep 8"; do n=$(echo $sh | tr -d ' -')
  timeout 60 build-tl2/fp4moe bench $sh --tokens 1 2 > $L/tl-$n.log 2>&1; echo "tl $n rc $?"
done
grep -h "TIMELINE\|EMPTY\|p50" $L/tl-tp8.log | grep -v "cycles" | head -60
grep -h "EMPTY" $L/tl-ep8.log
cd $OUT && tar czf logs.tgz logs
