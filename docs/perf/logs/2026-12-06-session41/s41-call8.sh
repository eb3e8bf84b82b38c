#!/usr/bin/env bash
# Session 41, call 8: the warp-specialized consumers of the 16-, 32- and 64-token tiles read the next stage's weights
# and scales once the current stage's last group is issued (after waiting for that stage's full barrier), instead of
# at the next stage's start (variant-ws-next-stage-loads.patch: build-nx/fp4moe in .device/nx.tgz), against HEAD
# (build-sm90, .device/gpu.tgz), alternated twice, the layer's own pick: TP8, EP8 and the full layer at T=256..1024.
# carry [".device/gpu.tgz", ".device/nx.tgz"].
set -uo pipefail
for a in .device/gpu.tgz .device/nx.tgz; do tar xzf $a; done
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/smi.txt 2>&1; cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in head nx; do
    bin=build-sm90/fp4moe; [ $v = nx ] && bin=build-nx/fp4moe
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8";; ep8) a="--ep 8";; full) a="";; esac
      $bin bench $a --tokens 256 384 512 768 1024 --iters 20 --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$s-$v-$r $(scripts/bench-summary $L/$s-$v-$r.log | cut -c1-330) [$SECONDS s]"
    done
  done
done
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
