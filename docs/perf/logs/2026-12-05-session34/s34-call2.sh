#!/usr/bin/env bash
# Session 34 call 2: HEAD's kernels (the same SASS as session 33's d332725) with the bench timing at the layer's own
# pick (`--time-at pick`, the new default): both shards over their whole range and the unsharded layer from T=1 to
# 16384, JSON beside each log. Here first: `FP4MOE_SKIP_WHEEL=1 scripts/gpu-build`, then
#   tar czf .device/c2.tgz build-sm90/fp4moe
# and run this with carry [".device/c2.tgz"].
set -uo pipefail
tar xzf .device/c2.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
T="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384"
for s in "tp8 --tp 8" "ep8 --ep 8" "full"; do
  set -- $s; n=$1; shift
  tt="$T"; [ $n = full ] && tt="1 8 64 256 512 1024 2048 4096 8192 16384"
  /usr/bin/time -f "%e s" timeout 200 build-sm90/fp4moe bench "$@" --tokens $tt --json $L/bench-$n.json > $L/bench-$n.log 2>&1
  echo "$n rc $? $(tail -1 $L/bench-$n.log) $(scripts/bench-summary $L/bench-$n.log)"
  grep -o 'T=[0-9]*: max tokens[^;]*;[^;]*;\|the sweep.s fastest is [^)]*)\|pick was not swept[^;]*' $L/bench-$n.log | tr '\n' ' ' | cut -c1-1500; echo
done
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
