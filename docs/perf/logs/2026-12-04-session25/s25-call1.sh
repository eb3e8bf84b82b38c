#!/usr/bin/env bash
# Session 25 call 1: down and the finalize set by set (FP4MOE_EXP_DOWN_SETS N tiles a set), against the layer's own path.
. scripts/gpu-env
B=build-x1/fp4moe
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $OUT/smi.txt
run() { local tag=$1; shift; /usr/bin/time -f "%e s" env "$@" > $OUT/$tag.log 2>&1; tail -1 $OUT/$tag.log; }
TP="bench --tp 8 --tokens 2048 3072 4096 8192 --block-m 64 128 --no-graph --iters 10"
run tp8-s0a FP4MOE_EXP_DOWN_SETS=0 $B $TP
run tp8-s1a FP4MOE_EXP_DOWN_SETS=1 $B $TP
run tp8-s0b FP4MOE_EXP_DOWN_SETS=0 $B $TP
run tp8-s1b FP4MOE_EXP_DOWN_SETS=1 $B $TP
S="bench --tp 8 --tokens 2048 4096 --block-m 64 128 --no-graph --iters 10"
run tp8-s2 FP4MOE_EXP_DOWN_SETS=2 $B $S
run tp8-s1-nodiscard FP4MOE_EXP_DOWN_SETS=1 FP4MOE_EXP_NO_DISCARD=1 $B $S
run tp8-s4 FP4MOE_EXP_DOWN_SETS=4 $B $S
E="bench --ep 8 --tokens 2048 4096 --block-m 64 128 --no-graph --iters 10"
run ep8-s0 FP4MOE_EXP_DOWN_SETS=0 $B $E
run ep8-s1 FP4MOE_EXP_DOWN_SETS=1 $B $E
F="bench --tokens 2048 4096 --block-m 64 128 --no-graph --iters 10"
run full-s0 FP4MOE_EXP_DOWN_SETS=0 $B $F
run full-s1 FP4MOE_EXP_DOWN_SETS=1 $B $F
grep -h "^exp " $OUT/*.log
