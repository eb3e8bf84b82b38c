#!/usr/bin/env bash
# Session 18 call 6: the routing inputs prefetched into L2 before the first kernel's wait (build-p), and that with
# gate_up's first piece 2/3 (build-p23) or 3/4 (build-p34) of a warp's K range, against 6b85d85 (build-s18c),
# alternated twice: TP8 / EP8 at T=1 2 8 64, the full layer at T=1 8 (chain per pass and the layer); GPU tests of build-p first.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
FP4MOE_FUZZ_CASES=50 timeout 200 build-p/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests-p.log 2>&1; echo "gpu-tests rc $?"; tail -3 $L/gpu-tests-p.log
for round in 1 2; do
  for v in s18c p p23 p34; do
    for sh in "--tp 8" "--ep 8" "--full"; do n=$(echo "x$sh" | tr -d ' -'); a=$sh; tk="1 2 8 64"; [ "$n" = xfull ] && a="" && tk="1 8"
      timeout 60 build-$v/fp4moe bench $a --tokens $tk --iters 30 > $L/ab-$v-$n-$round.log 2>&1
      echo "$v $n r$round rc $? $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $L/ab-$v-$n-$round.log | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ') | $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf " T%s %s/%s", $1, $8, $9}' $L/ab-$v-$n-$round.log)"
    done
  done
done
cd $OUT && tar czf logs.tgz logs
