#!/usr/bin/env bash
# Session 38 calls 2 and 3 (one warm H100, right after call 1 = ../2026-12-06-session37/s37-call3.sh): gate_up's grid
# trim (variant-gate-up-grid-trim.patch of session 37) at several margins, each with the trim unset, TP8 and EP8 at
# T=16, 32, 64, two rounds; the grids each margin gives are read from FP4MOE_PRINT_PLANS. Call 2 ran the margins
# "off 0 0.1 0.2" into m/, call 3 "off 0.05 0.1 0.15 0.2 0.25 0.3 0.4" into m2/ (MARGINS below).
# Here first: apply the patch, FP4MOE_SKIP_WHEEL=1 scripts/gpu-build; carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
. scripts/gpu-env
L=$OUT/m2; mkdir -p $L
for r in 1 2; do
  for v in ${MARGINS:-off 0.05 0.1 0.15 0.2 0.25 0.3 0.4}; do
    for s in tp8 ep8; do
      a="--${s:0:2} 8"
      if [ $v = off ]; then env -u FP4MOE_EXP_GU_TRIM FP4MOE_PRINT_PLANS=1 build-sm90/fp4moe bench $a --tokens 16 32 64 --iters 20 > $L/$s-$v-$r.log 2>&1
      else FP4MOE_EXP_GU_TRIM=$v FP4MOE_PRINT_PLANS=1 build-sm90/fp4moe bench $a --tokens 16 32 64 --iters 20 > $L/$s-$v-$r.log 2>&1; fi
      g=$(grep -o "T=\(16\|32\|64\) -> block_m 8, gate_up multistage 128x256, [0-9] stages, [0-9,]* B smem, 256 threads, [0-9]* blocks" \
            $L/$s-$v-$r.log | sort -u | sed 's/ -> .* \([0-9]*\) blocks/:\1/' | tr '\n' ' ')
      echo "$s $v $r: $(scripts/bench-summary $L/$s-$v-$r.log | cut -c11-58) grids $g"
    done
  done
done
cd $OUT && tar czf /tmp/a.tgz . && find . -mindepth 1 -delete && mv /tmp/a.tgz .
