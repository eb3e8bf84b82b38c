#!/usr/bin/env bash
# Session 41, call 7: down on the multistage config of the layer's block_m (16, 32, 64: one 128 x 256 stage an item
# where K = 256) while gate_up keeps the warp-specialized one (variant-down-multistage.patch, FP4MOE_EXP_DOWN_MS=1 in
# build-dms/fp4moe: .device/dms.tgz), against the same binary without the switch and HEAD's (build-sm90,
# .device/gpu.tgz), alternated twice, the layer's own pick: TP8 and EP8 at T=128..1024, the full layer at T=256..1024.
# carry [".device/gpu.tgz", ".device/dms.tgz"].
set -uo pipefail
for a in .device/gpu.tgz .device/dms.tgz; do tar xzf $a; done
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/smi.txt 2>&1; cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in head off on; do
    bin=build-dms/fp4moe; [ $v = head ] && bin=build-sm90/fp4moe
    sw=0; [ $v = on ] && sw=1
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="128 256 384 512 768 1024";; ep8) a="--ep 8"; t="128 256 384 512 768 1024";;
                 full) a=""; t="256 512 1024";; esac
      FP4MOE_EXP_DOWN_MS=$sw FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens $t --iters 20 --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$s-$v-$r $(scripts/bench-summary $L/$s-$v-$r.log | cut -c1-400) [$SECONDS s]"
    done
  done
done
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
