#!/usr/bin/env bash
# Session 33 call 6 (the session's last device seconds): d332725's kernels (build-sm90) against 84b8f91 (build-b), one
# round each, on whatever GPU comes: TP8 at T=512, 1024 and 2048 over block_m 32, 64 and 128, the full layer at
# T=1024 and 2048 over 64 and 128 (whether the 64-token tile's rounded items move the 64/128 choice at T=2048).
# Carry [".device/s33c6.tgz"]: build-sm90/fp4moe, build-b/fp4moe.
set -uo pipefail
tar xzf .device/s33c6.tgz
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name --format=csv,noheader > $L/smi.txt 2>&1; cat $L/smi.txt
for s in "tp8 --tp 8 --tokens 512 1024 2048 --block-m 32 64 128" "full --tokens 1024 2048 --block-m 64 128"; do
  set -- $s; n=$1; shift
  for b in sm90 b; do
    timeout 70 build-$b/fp4moe bench "$@" --no-graph --iters 10 > $L/sw-$b-$n.log 2>&1
    echo "$b $n rc $? $(grep -o 'T=[0-9]*: max tokens\|layer us by block_m: [^(]*(the layer picks [0-9]*)\|timing the layer ([0-9.]* us)' $L/sw-$b-$n.log | sed 's/: max tokens//; s/layer us by block_m: //; s/timing the layer (\([0-9.]*\) us)/med \1 |/' | tr '\n' ' ')"
  done
done
grep -h "^measured" $L/*.log | cut -c1-130 | sort | uniq -c | head -2
cd $OUT && tar czf logs.tgz logs
