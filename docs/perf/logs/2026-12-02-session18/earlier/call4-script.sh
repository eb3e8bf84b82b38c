#!/usr/bin/env bash
# Session 18 call 4: timeline of the direct decode kernels at HEAD (6b85d85 + globaltimer stamps, build-tl2): single-pass
# graph and 16-pass chain graph; empty-graph floors.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
for sh in "--tp 8" "--ep 8"; do n=$(echo $sh | tr -d ' -')
  timeout 60 build-tl2/fp4moe bench $sh --tokens 1 2 > $L/tl-$n.log 2>&1; echo "tl $n rc $?"
done
grep -h "TIMELINE\|EMPTY\|p50" $L/tl-tp8.log | grep -v "cycles" | head -60
grep -h "EMPTY" $L/tl-ep8.log
cd $OUT && tar czf logs.tgz logs
