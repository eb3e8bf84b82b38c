#!/usr/bin/env bash
# Session 36 call 1 (H200 wanted): (1) the benches' once-per-T warm-up (73a253c, HEAD's CLI) against 140ddd6's CLI
# (old/): `tune --max-tokens 2` of the full layer alternated (old, new, old, new), then `bench --tokens 1 8` of each
# alternated (the chain at T=8: the every-timing form cost +2.8% on an H100); (2) scripts/gpu-suite's bench, shards,
# base, tune, report, quantize and zipf sections with every T of the shards' tables, the base A/B being d332725's
# H200 check (84b8f91's CLI as build-base, both shards and the full layer at T=256..1024, alternated twice).
# On another GPU only part (1) runs (call 1 ran it so, on an H100). FP4MOE_SUITE and FP4MOE_CALL_LIMIT (585 s for the
# whole call) were added after that run (9e7f799); they change only part (2). Here first: FP4MOE_BASE_BUILD=<84b8f91's
# CLI> scripts/gpu-build; carry [".device/gpu.tgz", ".device/c2.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
mkdir -p old && tar xzf .device/c2.tgz -C old
. scripts/gpu-env
W=$OUT/warmup; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $W/smi.txt 2>&1; cp $W/smi.txt $OUT/smi.txt
i=0
for b in old new old new; do
  i=$((i + 1)); x=build-sm90/fp4moe; [ $b = old ] && x=old/build-sm90/fp4moe
  FP4MOE_CACHE_DIR=$W/cache-$b-$i timeout 60 $x tune --max-tokens 2 > $W/tune-$b-$i.log 2>&1
  echo "tune $b $i rc $? $(grep -E '^ +[12] ' $W/tune-$b-$i.log | tr -s ' ' | tr '\n' '|')"
done
i=0
for b in old new old new; do
  i=$((i + 1)); x=build-sm90/fp4moe; [ $b = old ] && x=old/build-sm90/fp4moe
  timeout 90 $x bench --tokens 1 8 --iters 20 > $W/full-$b-$i.log 2>&1
  echo "full $b $i rc $? $(grep -o 'timing the layer ([0-9.]* us)\|[0-9.]* us per pass\|layer us by block_m: [^(]*' $W/full-$b-$i.log | tr '\n' ' ' | cut -c1-400)"
done
(cd $OUT && tar czf warmup.tgz warmup && rm -rf warmup)
echo "warm-up part done at $SECONDS s"
# The tables are for the H200 (an H100 ran them in session 35): elsewhere, or with FP4MOE_WARMUP_ONLY=1, stop here.
if ! grep -q H200 $OUT/smi.txt 2>/dev/null || [ "${FP4MOE_WARMUP_ONLY:-0}" = 1 ]; then exit 0; fi
FP4MOE_SUITE="${FP4MOE_SUITE:-bench shards base tune report quantize zipf}" \
FP4MOE_TOKENS="1 2 8 64 256 512 1024 2048 4096 8192 16384" \
FP4MOE_SHARD_TOKENS="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" \
FP4MOE_AB_SHAPES="full,--tp 8,--ep 8" FP4MOE_AB_TOKENS="256 512 1024" TAIL=3 \
  timeout $((${FP4MOE_CALL_LIMIT:-585} - SECONDS)) scripts/gpu-suite
echo "suite rc $? at $SECONDS s"
# (the device tool brings back few files: one archive of everything)
cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
