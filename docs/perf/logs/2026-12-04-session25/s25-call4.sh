#!/usr/bin/env bash
# Session 25 call 4: the set-by-set down at decode T (TP8 T=256..1024, the layer's block_m), sets of 2..24 N tiles, discard on/off; ncu of T=512 sets of 4.
set -uo pipefail
. scripts/gpu-env
B=build-x1/fp4moe
L=$OUT/l; mkdir -p $L
S="bench --tp 8 --tokens 256 512 1024 --no-graph --iters 20"
FP4MOE_EXP_DOWN_SETS=0 $B $S > $L/tp8-s0a.log 2>&1
for g in 2 4 8 12 24; do
  for nd in 0 1; do FP4MOE_EXP_DOWN_SETS=$g FP4MOE_EXP_NO_DISCARD=$nd $B $S > $L/tp8-s$g-nd$nd.log 2>&1; done
done
FP4MOE_EXP_DOWN_SETS=0 $B $S > $L/tp8-s0b.log 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
for cfg in "4 0" "4 1" "0 0"; do set -- $cfg
  FP4MOE_EXP_DOWN_SETS=$1 FP4MOE_EXP_NO_DISCARD=$2 timeout 100 $NCU --clock-control none --cache-control none --kernel-name-base mangled \
    -k 'regex:MoeEpilogueE1|finalize' -s 40 -c 12 --metrics $M \
    $B bench --tp 8 --tokens 512 --block-m 32 --no-graph --iters 5 > $L/ncu512-s$1-nd$2.txt 2>&1
done
for f in $L/tp8-*.log; do echo "== $(basename $f)"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " $f | awk '{print "T="$1, "bm"$3, "gu", $6, "down", $7, "layer", $8}'; done
cd $OUT && tar czf logs.tgz l
