#!/usr/bin/env bash
# Session 35 call 6: the warm-up as committed (the least busy time once per T, before its first config) against
# 140ddd6 (old/): `tune --max-tokens 2` of the full layer, alternated (old, new, new), then `bench --tokens 1 8` of
# the new binary (its T=8 chain should be the old binary's 405 us again, call 5). Here first: FP4MOE_SKIP_WHEEL=1
# scripts/gpu-build; tar czf .device/wu2.tgz build-sm90/fp4moe; .device/c2.tgz holds 140ddd6's CLI; carry both.
set -uo pipefail
tar xzf .device/wu2.tgz
mkdir -p old && tar xzf .device/c2.tgz -C old
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
i=0
for b in old new new; do
  i=$((i + 1)); x=build-sm90/fp4moe; [ $b = old ] && x=old/build-sm90/fp4moe
  FP4MOE_CACHE_DIR=$L/cache-$b-$i timeout 60 $x tune --max-tokens 2 > $L/tune-$b-$i.log 2>&1; echo "tune $b $i rc $?"; tail -3 $L/tune-$b-$i.log | head -2
done
timeout 90 build-sm90/fp4moe bench --tokens 1 8 --iters 20 > $L/full-new.log 2>&1
echo "full new rc $? $(grep -o 'T=[0-9]*: max tokens[^;]*;[^;]*;\|timing the layer ([0-9.]* us)\|[0-9.]* us per pass' $L/full-new.log | tr '\n' ' ' | cut -c1-600)"
cd $OUT && tar czf logs.tgz logs
