#!/usr/bin/env bash
# Session 39 call 6: the real gate_up kernel's stream per block: TP8 and EP8 at T=8, 16, 64 with gate_up's persistent
# grid forced to 66, 132, 264 and 396 blocks (FP4MOE_EXP_GU_GRID; variant-gate-up-grid-forced.patch on HEAD, built as
# build-gg), the bench's gate_up timed alone, two rounds. At 132 blocks and fewer every block has an SM to itself.
# carry [".device/gg.tgz"] (HEAD's CLI plus the override, which is host code only).
set -uo pipefail
tar xzf .device/gg.tgz
. scripts/gpu-env
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/smi.txt
L=$OUT/g; mkdir -p $L
for r in 1 2; do
  for s in tp8 ep8; do
    for g in default 66 132 264 396; do
      if [ $g = default ]; then env -u FP4MOE_EXP_GU_GRID FP4MOE_PRINT_PLANS=1 build-gg/fp4moe bench --${s:0:2} 8 --tokens 8 16 64 --block-m 8 --no-graph --iters 20 > $L/$s-$g-$r.log 2>&1
      else FP4MOE_EXP_GU_GRID=$g FP4MOE_PRINT_PLANS=1 build-gg/fp4moe bench --${s:0:2} 8 --tokens 8 16 64 --block-m 8 --no-graph --iters 20 > $L/$s-$g-$r.log 2>&1; fi
      grids=$(grep -o "T=\(8\|16\|64\) -> block_m 8, \(gate_up\|both GEMMs\) multistage 128x256, [0-9] stages, [0-9,]* B smem, 256 threads, [0-9]* blocks" $L/$s-$g-$r.log | sort -u | sed 's/ -> .* \([0-9]*\) blocks/:\1/' | tr '\n' ' ')
      gu=$(awk '$1 ~ /^(8|16|64)$/ && NF > 15 {printf " T%s gate_up %s down %s layer %s", $1, $6, $7, $8}' $L/$s-$g-$r.log)
      echo "$s grid $g r$r:$gu | $grids"
    done
  done
done
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz . && ls -la
