#!/usr/bin/env bash
# Session 31, call 7: the direct path's TP8 T=1 timeline with gate_up held to 56 registers (build-tlh56) beside the
# uncapped stamps (build-tl2h) and no stamps (build-n, 65de5c7), two rounds, on whichever GPU comes (call 2 ran it on
# an H100). Carry [".device/bins-s31e.tgz", ".device/s31-call7.sh"].
set -uo pipefail
. scripts/gpu-env
tar xzf .device/bins-s31e.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
for r in 1 2; do
  for b in n tl2h tlh56; do
    log=$L/$b-tp8t1-$r.log
    FP4MOE_EXP_TIMELINE=1 timeout 40 build-$b/fp4moe bench --tp 8 --tokens 1 --iters 20 > $log 2>&1
    echo "$b r$r: $(grep -o '[0-9.]* us per pass' $log) | $(awk '/^timeline \(/{n++} n==4' $log | grep 'gu \|dn ' | sed 's/^timeline \(.*[a-z0-9]\) *n=.* p50 *\([0-9.]*\).* max *\([0-9.]*\).*/\1 \2 (\3);/' | tr -s ' \n' ' ')"
  done
done
