#!/usr/bin/env bash
# Session 25 call 3: ncu DRAM bytes of the set-by-set down (one N tile a set) and its finalize, discard on and off, and of today's path; TP8 T=2048 bm64.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum
for cfg in "1 0" "1 1" "0 0"; do set -- $cfg
  FP4MOE_EXP_DOWN_SETS=$1 FP4MOE_EXP_NO_DISCARD=$2 timeout 150 $NCU --clock-control none --cache-control none --kernel-name-base mangled \
    -k 'regex:MoeEpilogueE1|finalize' -s 40 -c 8 --metrics $M \
    build-x1/fp4moe bench --tp 8 --tokens 2048 --block-m 64 --no-graph --iters 5 > $L/ncu-s$1-nd$2.txt 2>&1
  echo "== sets $1 nodiscard $2 rc $?"
  grep -E "^  [a-zA-Z_].*\(|dram__bytes|gpu__time|lts__t_sectors" $L/ncu-s$1-nd$2.txt | sed 's/(MoeGemmParams.*//; s/(const .*//' | cut -c1-120
done
cd $OUT && tar czf logs.tgz logs
