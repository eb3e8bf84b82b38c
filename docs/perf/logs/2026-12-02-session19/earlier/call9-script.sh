#!/usr/bin/env bash
# Session 19 call 9: clocks and power sampled every 10 ms while the bench times the unsharded layer at T=64 (bm8) on
# the stream and then from graphs (the graph replays were 10-15% slower there, the shards' not), with timestamps; the
# debug build also times back-to-back stream launches on the graphs' stream and on the legacy stream, with timelines.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the cuBLAS lines of scripts/gpu-env, which ran inline)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_throttle_reasons.active --format=csv -lms 10 > $L/smi.csv 2>&1 &
SMI=$!
sleep 1
date +%H:%M:%S.%N > $L/t-start.txt
FP4MOE_BENCH_STAMPS=1 timeout 100 build-tl/fp4moe bench --tokens 64 --block-m 8 --iters 30 > $L/full.log 2>&1
date +%H:%M:%S.%N > $L/t-end.txt
sleep 1
kill $SMI
awk -F', ' 'NR>1 {print $2, $3, $4, $5, $6, $7}' $L/smi.csv | sort | uniq -c | sort -rn | head -30
grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/full.log | sed 's/: max tokens.*://'
grep -E '^STREAMSPAN|^TIMELINE|gate_up end|down    end|items per block' $L/full.log | cut -c1-160
awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s bm%s layer %s graph %s\n", $1, $3, $8, $9}' $L/full.log
cd $OUT && tar czf logs.tgz logs
