#!/usr/bin/env bash
# Session 31, call 2: down's warps speculate on their own pair's expert (variant-down-speculation.patch on 65de5c7:
# the first batch of weights goes out from the pair id, before the routing's shuffles). Its GPU tests; the chained
# pass against 65de5c7 (build-n) alternated twice on TP8 T=1..8 and EP8 T=1..3; the timeline of both (build-tl2h:
# 65de5c7 + session 29's timeline patch; build-tls: the change + the same stamps and one more, "dn spec issued"), and
# the same two with gate_up<false> held to 56 registers (__maxnreg__, variant-timeline-ids-gate-up-56-registers.patch
# and variant-down-speculation-timeline.patch: the stamps took it to 58, which leaves room for two down blocks an SM
# beside gate_up's two, not three; whether that is why the timelines had down start as gate_up ends). T=1 only for
# those (the cap spills gate_up<true>, T=2's kernel).
# Carry [".device/bins-s31c.tgz", ".device/s31-call2.sh"]; about 4 minutes.
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins-s31c.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
FP4MOE_FUZZ_CASES=60 timeout 150 build-s/fp4moe_gpu_tests > $L/gpu-tests-s.log 2>&1; echo "s gpu tests rc=$? ($(el)s): $(grep -h 'PASSED\|FAILED\|tests from .* ran' $L/gpu-tests-s.log | tr '\n' ' ')"
s() { grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)\|[0-9.]* us per pass' "$1" | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g'; }
for r in 1 2; do
  for b in n s; do
    for a in "--tp 8 --tokens 1 2 3 4 8" "--ep 8 --tokens 1 2 3"; do
      tag=$(echo "$a" | cut -d' ' -f1-2 | tr -d ' -'); timeout 60 build-$b/fp4moe bench $a --iters 20 > $L/dec-$b-$tag-$r.log 2>&1
      echo "$b r$r $tag ($(el)s): $(s $L/dec-$b-$tag-$r.log)"
    done
  done
done
for r in 1 2; do
  for b in tl2h tls tlh56 tls56; do
    for a in "--tp 8 --tokens 1" "--ep 8 --tokens 1" "--tp 8 --tokens 2"; do
      [[ $b == *56 && $a == *"tokens 2" ]] && continue
      tag=$(echo "$a" | tr -d ' -'); log=$L/$b-$tag-$r.log
      FP4MOE_EXP_TIMELINE=1 timeout 40 build-$b/fp4moe bench $a --iters 20 > $log 2>&1
      echo "$b r$r $a ($(el)s): $(s $log) | $(awk '/^timeline \(/{n++} n==4' $log | grep 'gu stored\|dn ' | sed 's/^timeline \(.*[a-z0-9]\) *n=.* p50 *\([0-9.]*\).* max *\([0-9.]*\).*/\1 \2 (\3);/' | tr -s ' \n' ' ')"
    done
  done
done
