#!/usr/bin/env bash
# Session 34 call 2: HEAD's kernels (the same SASS as session 33's d332725) with the bench timing at the layer's own
# pick (`--time-at pick`, the new default): both shards over their whole range and the unsharded layer from T=1 to
# 16384, JSON beside each log. On an H200, first session 33's A/B of d332725 (build-sm90) against 84b8f91 (build-b)
# at T=256..1024 with every block_m, alternated twice (next-call.sh without its GPU tests). Here first:
# `FP4MOE_SKIP_WHEEL=1 scripts/gpu-build`, then
#   tar czf .device/c2.tgz build-sm90/fp4moe; tar czf .device/next.tgz build-b/fp4moe (84b8f91's CLI)
# and run this with carry [".device/c2.tgz", ".device/next.tgz"].
set -uo pipefail
tar xzf .device/c2.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
if grep -q H200 $L/smi.txt; then
  tar xzf .device/next.tgz
  for r in 1 2; do
    for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
      set -- $s; n=$1; shift
      for b in sm90 b; do
        [ $SECONDS -gt 300 ] && { echo "skipped $b $n r$r: past 300 s"; continue; }
        a=""; [ $b = sm90 ] && a="--time-at fastest"  # (84b8f91 times there, and has no flag)
        timeout 80 build-$b/fp4moe bench "$@" $a --tokens 256 512 1024 --iters 20 > $L/dec-$b-$n-r$r.log 2>&1
        echo "$b $n r$r rc $? $(grep -o 'T=[0-9]*: max tokens\|layer us by block_m: [^(]*\|timing the layer ([0-9.]* us)\|[0-9.]* us per pass' $L/dec-$b-$n-r$r.log | sed 's/: max tokens//; s/layer us by block_m: //; s/timing the layer (\([0-9.]*\) us)/med \1 |/; s/ us per pass/ chain/' | tr '\n' ' ')"
      done
    done
  done
fi
T="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384"
for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
  set -- $s; n=$1; shift
  tt="$T"; [ $n = full ] && tt="1 8 64 256 512 1024 2048 4096 8192 16384"
  left=$((560 - SECONDS)); [ $left -lt 30 ] && { echo "skipped $n: $SECONDS s gone"; continue; }
  /usr/bin/time -f "%e s" timeout $((left < 200 ? left : 200)) build-sm90/fp4moe bench "$@" --tokens $tt --json $L/bench-$n.json > $L/bench-$n.log 2>&1
  echo "$n rc $? $(tail -1 $L/bench-$n.log) $(scripts/bench-summary $L/bench-$n.log)"
  grep -o 'T=[0-9]*: max tokens[^;]*;[^;]*;\|the sweep.s fastest is [^)]*)\|pick was not swept[^;]*' $L/bench-$n.log | tr '\n' ' ' | cut -c1-1500; echo
done
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
