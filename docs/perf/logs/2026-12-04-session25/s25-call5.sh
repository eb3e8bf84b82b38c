#!/usr/bin/env bash
# Session 25 call 5: the finalize inside down (FP4MOE_FF_BLOCKS finalize blocks of the grid; 0 = the finalize kernel), TP8/EP8/full.
set -uo pipefail
. scripts/gpu-env
B=build-x2/fp4moe
L=$OUT/l; mkdir -p $L
TP="bench --tp 8 --tokens 64 128 256 512 1024 2048 --no-graph --iters 20"
for f in 0 8 14 20 28 40 0; do FP4MOE_FF_BLOCKS=$f $B $TP > $L/tp8-f$f-$RANDOM.log 2>&1; done
for f in 0 14 28; do FP4MOE_FF_ANY_T=1 FP4MOE_FF_BLOCKS=$f $B bench --tp 8 --tokens 3072 4096 --no-graph --iters 10 > $L/tp8big-f$f.log 2>&1; done
for f in 0 8 14 20 28; do FP4MOE_FF_BLOCKS=$f $B bench --ep 8 --tokens 64 256 512 1024 2048 --no-graph --iters 20 > $L/ep8-f$f.log 2>&1; done
for f in 0 14 28; do FP4MOE_FF_ANY_T=1 FP4MOE_FF_BLOCKS=$f $B bench --tokens 128 256 512 1024 --no-graph --iters 20 > $L/full-f$f.log 2>&1; done
for f in $L/*.log; do echo "== $(basename $f)"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " $f | awk '{printf "T=%s bm%s down %s layer %s | ", $1, $3, $7, $8} END {print ""}'; done
grep -h "finalize kernel after down" $L/tp8-f14-*.log | sed 's/.*medians/medians/' | cut -c1-80 | head -3
cd $OUT && tar czf logs.tgz l && rm -rf l
