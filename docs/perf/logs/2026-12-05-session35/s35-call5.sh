#!/usr/bin/env bash
# Session 35 call 5: the bench's warm-up with a least busy time (tools/bench/warm_up.h) against HEAD before it
# (140ddd6, old/), on the full layer's T=1 where the first config timed after the weights' setup read 80 us against
# 71 us for the same config later (calls 1-4). Each binary: `bench --tokens 1 8`, then T=8 first (`--tokens 8 1`), and
# `tune --max-tokens 2`, alternated twice (the second round only if the first took under 150 s); TP8 T=1 2 8
# with both once (while under 300 s). Here first: FP4MOE_SKIP_WHEEL=1
# scripts/gpu-build; tar czf .device/wu.tgz build-sm90/fp4moe; .device/c2.tgz holds 140ddd6's
# CLI; carry [".device/wu.tgz", ".device/c2.tgz"].
set -uo pipefail
tar xzf .device/wu.tgz
mkdir -p old && tar xzf .device/c2.tgz -C old
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
sum() { grep -o 'T=[0-9]*: max tokens[^;]*;[^;]*;\|timing the layer ([0-9.]* us)\|[0-9.]* us per pass' "$1" | tr '\n' ' ' | cut -c1-600; }
for r in 1 2; do
  [ $r = 2 ] && [ $SECONDS -gt 150 ] && { echo "round 2 skipped: $SECONDS s gone"; break; }
  for b in old new; do
    x=build-sm90/fp4moe; [ $b = old ] && x=old/build-sm90/fp4moe
    timeout 100 $x bench --tokens 1 8 --iters 20 > $L/full-$b-r$r.log 2>&1; echo "full $b r$r rc $? $(sum $L/full-$b-r$r.log)"
    timeout 100 $x bench --tokens 8 1 --iters 20 > $L/full81-$b-r$r.log 2>&1; echo "full81 $b r$r rc $? $(sum $L/full81-$b-r$r.log)"
    FP4MOE_CACHE_DIR=$L/cache-$b-r$r timeout 100 $x tune --max-tokens 2 > $L/tune-$b-r$r.log 2>&1; echo "tune $b r$r rc $?"; tail -4 $L/tune-$b-r$r.log
  done
done
for b in old new; do
  [ $SECONDS -gt 300 ] && { echo "tp8 $b skipped: $SECONDS s gone"; continue; }
  x=build-sm90/fp4moe; [ $b = old ] && x=old/build-sm90/fp4moe
  /usr/bin/time -f "%e s" timeout 120 $x bench --tp 8 --tokens 1 2 8 --iters 20 > $L/tp8-$b.log 2>&1; echo "tp8 $b rc $? $(tail -1 $L/tp8-$b.log) $(sum $L/tp8-$b.log)"
done
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
