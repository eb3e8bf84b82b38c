#!/usr/bin/env bash
# Session 18 review-mend call: GPU tests of the mended tests (replay_graph), then the mended bench (one capture helper
# for the single-pass and chain graphs) against 6b85d85 (build-s18c) on TP8 at T=1 2 8, alternated twice.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
# (here the three lines of ../../2026-12-01-session15/call2-script.sh that put cuBLAS on LD_LIBRARY_PATH)
FP4MOE_FUZZ_CASES=100 timeout 200 build-rv/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu-tests rc $?"; tail -3 $L/gpu-tests.log; grep -B5 "FAILED  \]" $L/gpu-tests.log | head -20
for round in 1 2; do for v in s18c rv; do
  timeout 60 build-$v/fp4moe bench --tp 8 --tokens 1 2 8 --iters 30 > $L/ab-$v-tp8-$round.log 2>&1; echo "$v r$round rc $?"
done; done
grep "measured:" $L/ab-rv-tp8-1.log
sed -n '/^     T active/,/^(bm dir/p' $L/ab-rv-tp8-1.log | head -6
for f in $L/ab-*.log; do echo "$(basename $f) $(grep -o 'T=[0-9]*: .*passes in one CUDA graph (one workspace): [0-9.]* us per pass' $f | sed 's/: max tokens.*://; s/passes in one CUDA graph (one workspace)/x/; s/ us per pass//' | tr '\n' ' ')"; done
cd $OUT && tar czf logs.tgz logs
