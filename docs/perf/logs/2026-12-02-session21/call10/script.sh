#!/usr/bin/env bash
# Session 21 call 10: partial stores with an L2 evict_last policy (build-v4) against 3ceac52 (build-final): GPU tests, ncu DRAM
# bytes of down and the finalize at TP8 T=128, 256, the TP8 decode T=64..512 alternated twice, prefill and the full layer once.
set -uo pipefail
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
pf() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s gu %s down %s layer %s |", $1, $3, $6, $7, $8}' "$1"; }
FP4MOE_FUZZ_CASES=100 timeout 200 build-v4/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1
echo "gpu tests rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/gpu-tests.log | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' $L/gpu-tests.log | head -20
for t in 128 256; do
  timeout 150 $NCU --clock-control none --cache-control none --kernel-name-base mangled -k 'regex:MoeEpilogueE1|moe_finalize_gather' -c 2 \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    build-v4/fp4moe bench --tp 8 --tokens $t --no-graph --iters 5 > $L/ncu-v4-tp8-$t.txt 2>&1
  echo "== ncu v4 T=$t rc $? $(grep -E 'dram__bytes|gpu__time' $L/ncu-v4-tp8-$t.txt | awk '{printf " %s %s %s", $1, $3, $2}')"
done
for r in 1 2; do
  for b in final v4; do
    timeout 90 build-$b/fp4moe bench --tp 8 --tokens 64 128 256 512 --iters 20 > $L/dec-$b-tp8-r$r.log 2>&1
    echo "dec $b tp8 r$r rc $? $(scripts/bench-summary $L/dec-$b-tp8-r$r.log)"
  done
done
for b in final v4; do
  timeout 90 build-$b/fp4moe bench --tp 8 --tokens 4096 16384 --block-m 128 --no-graph --iters 5 > $L/pf-$b-tp8.log 2>&1
  echo "pf $b tp8 rc $? $(pf $L/pf-$b-tp8.log)"
  timeout 90 build-$b/fp4moe bench --tokens 8 64 512 --iters 20 > $L/dec-$b-full.log 2>&1
  echo "dec $b full rc $? $(scripts/bench-summary $L/dec-$b-full.log)"
done
grep -h "measured:" $L/*.log | cut -c1-110 | sort | uniq -c
cd $OUT && tar czf logs.tgz logs
