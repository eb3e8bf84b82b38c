#!/usr/bin/env bash
# Session 18 call 7: the routing inputs id and weight loaded together (ld.relaxed.gpu: build-f) and that with the
# L2 prefetch of call 6 (build-fp), against 6b85d85 (build-s18c), alternated twice: TP8 / EP8 at T=1 2 8 64 512, the
# full layer at T=1 8 64 (chain per pass and the layer); GPU tests of build-f first.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
FP4MOE_FUZZ_CASES=50 timeout 200 build-f/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests-f.log 2>&1; echo "gpu-tests rc $?"; tail -3 $L/gpu-tests-f.log
for round in 1 2; do
  for v in s18c f fp; do
    for sh in "--tp 8" "--ep 8" "--full"; do n=$(echo "x$sh" | tr -d ' -'); a=$sh; tk="1 2 8 64 512"; [ "$n" = xfull ] && a="" && tk="1 8 64"
      timeout 60 build-$v/fp4moe bench $a --tokens $tk --iters 30 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
cd $OUT && tar czf logs.tgz logs
