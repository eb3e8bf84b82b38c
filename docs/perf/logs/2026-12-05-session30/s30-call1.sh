#!/usr/bin/env bash
# Prepared in session 29 as next-call.sh; run as session 30's call 1 (on an H200) with the binaries its header says how to build. Two questions, one call:
# 1. Which launch's programmatic dependence slows the TP8 shard's prefill? The bench's "without programmatic launch"
#    variant has been 0.8-2.2% faster (medians) at TP8 T=2048..16384 in the logs of sessions 8-29 (prefill.md, "Programmatic
#    launch costs the TP8 shard"), while on EP8 and the full layer it is level or slower. build-x = HEAD +
#    experiment-pdl-off-mask.patch: FP4MOE_EXP_PDL_OFF bits turn it off per launch (1 routing count, 2 place,
#    4 gate_up, 8 down, 16 finalize).
# 2. What the 2.4 us between a direct gate_up block's start and its routed stamp are (TP8 T=1): build-tl2 = HEAD +
#    variant-direct-timeline-ids.patch (session 27's timeline with two more stamps: the ids arrived, warp 0's copies
#    issued; and down's routed stamp before its copies).
# Binaries, from a checkout of this commit with build-sm90 configured (scripts/gpu-build):
#   for v in x:experiment-pdl-off-mask tl2:variant-direct-timeline-ids; do git apply docs/perf/logs/2026-12-05-session29/${v#*:}.patch
#     cmake --build build-sm90 --target fp4moe_cli && mkdir -p build-${v%%:*} && cp build-sm90/fp4moe build-${v%%:*}/; git checkout kernels src; done
#   tar czf .device/bins-next.tgz build-x/fp4moe build-tl2/fp4moe; cp docs/perf/logs/2026-12-05-session30/s30-call1.sh .device/next-call.sh  (this file; session 29's copy is in git)
# Run: carry [".device/bins-next.tgz", ".device/next-call.sh"], bash .device/next-call.sh (about 3 minutes).
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins-next.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
s() { grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)' "$1" | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g'; }
for r in 1 2; do
  for m in 0 1 2 4 8 16 31; do
    FP4MOE_EXP_PDL_OFF=$m timeout 40 build-x/fp4moe bench --tp 8 --tokens 2048 4096 16384 --block-m 64 128 --no-graph --iters 10 > $L/pf-tp8-m$m-$r.log 2>&1
    echo "tp8 m$m r$r ($(el)s): $(s $L/pf-tp8-m$m-$r.log)"
  done
done
for m in 0 31; do
  FP4MOE_EXP_PDL_OFF=$m timeout 40 build-x/fp4moe bench --ep 8 --tokens 4096 16384 --block-m 128 --no-graph --iters 10 > $L/pf-ep8-m$m.log 2>&1
  echo "ep8 m$m ($(el)s): $(s $L/pf-ep8-m$m.log)"
done
for mdl in deepseek-v3 qwen3-235b; do
  timeout 40 build-x/fp4moe bench --model $mdl --tp 8 --tokens 4096 16384 --block-m 128 --no-graph --iters 10 > $L/pf-$mdl-tp8.log 2>&1
  echo "$mdl tp8 ($(el)s): $(s $L/pf-$mdl-tp8.log)"
done
for a in "--tp 8 --tokens 1" "--ep 8 --tokens 1" "--tp 8 --tokens 2"; do
  tag=$(echo "$a" | tr -d ' -')
  FP4MOE_EXP_TIMELINE=1 timeout 40 build-tl2/fp4moe bench $a --iters 20 > $L/tl2-$tag.log 2>&1
  echo "== tl2 $a ($(el)s)"; grep -A20 'timeline (' $L/tl2-$tag.log | head -22
done
