#!/usr/bin/env bash
# Session 25 call 2: the set-by-set down with and without the discard, sets of 1, 2, 4, 8 N tiles (logs in one tarball).
. scripts/gpu-env
B=build-x1/fp4moe
mkdir -p $OUT/l
S="bench --tp 8 --tokens 2048 4096 --block-m 64 128 --no-graph --iters 10"
for g in 1 2 4 8; do
  for nd in 0 1; do FP4MOE_EXP_DOWN_SETS=$g FP4MOE_EXP_NO_DISCARD=$nd $B $S > $OUT/l/tp8-s$g-nd$nd.log 2>&1; done
done
FP4MOE_EXP_DOWN_SETS=0 $B $S > $OUT/l/tp8-s0.log 2>&1
cd $OUT && tar czf logs.tgz l && rm -rf l
