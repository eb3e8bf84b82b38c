#!/usr/bin/env bash
# Session 21 call 9 (call 8 ran this with ncu's default cache flush before each kernel): do freshly written partial sums stay in L2? ncu DRAM bytes of the down GEMM (fp32 partials) and the
# finalize on the TP8 shard at T=128 and 256 (25 and 50 MB of partials, under the 63 MB L2) and T=1024 (201 MB), 3ceac52.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for t in 128 256 1024; do  # --cache-control none: no flush between kernels
  timeout 150 $NCU --clock-control none --cache-control none --kernel-name-base mangled -k 'regex:MoeEpilogueE1|moe_finalize_gather' -c 4 \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    build-final/fp4moe bench --tp 8 --tokens $t --no-graph --iters 5 > $L/ncu-tp8-$t.txt 2>&1
  echo "== T=$t rc $?"
  grep -E "^  [a-zA-Z_].*\(|dram__bytes|gpu__time|lts__t_sectors" $L/ncu-tp8-$t.txt | sed 's/(MoeGemmParams.*//; s/(const T1.*//' | cut -c1-140
done
cd $OUT && tar czf logs.tgz logs
