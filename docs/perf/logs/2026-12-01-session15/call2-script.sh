#!/usr/bin/env bash
# Device call 2 (session 15): the 128-token tile with a 32-register producer (row table in shared memory) and
# 112-register consumers (wgmmas no longer serialized): GPU tests, A/B against 3587d9a (same 128-tile SASS as
# 809379c) at T=4096 and 16384, prefill tables, ncu of the new gate_up, decode A/B on the small-K tiles.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  ls "$d"/libcublas.so* >/dev/null 2>&1 && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" && break
done
t0=$(date +%s)
FP4MOE_FUZZ_CASES=100 timeout 150 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1; rc=$?
echo "gpu-tests rc $rc $(( $(date +%s) - t0 )) s"; tail -4 $L/gpu-tests.log; grep -B5 "FAILED  \]" $L/gpu-tests.log | head -30
summ() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "T%s bm%s layer %s gu %s down %s TF %s cub %s  ", $1, $3, $8, $6, $7, $13, $16}' "$1"; echo; }
for r in 1 2; do
  for b in base new; do
    bin=build-sm90/fp4moe; [ $b = base ] && bin=build-base/fp4moe
    for sh in "" "--tp 8" "--ep 8"; do
      n=full; [ -n "$sh" ] && n=$(echo $sh | tr -d ' -')
      timeout 120 $bin bench $sh --tokens 4096 16384 --block-m 128 --no-graph --iters 10 > $L/ab-$b-$n-r$r.log 2>&1
      echo "r$r $b $n: $(summ $L/ab-$b-$n-r$r.log)"
    done
  done
done
for sh in "" "--tp 8" "--ep 8"; do
  n=full; [ -n "$sh" ] && n=$(echo $sh | tr -d ' -')
  timeout 200 build-sm90/fp4moe bench $sh --tokens 2048 3072 4096 8192 16384 --block-m 64 128 --no-graph > $L/bench-$n.log 2>&1
  echo "prefill $n: $(summ $L/bench-$n.log)"
done
for r in 1 2; do for b in base new; do
  bin=build-sm90/fp4moe; [ $b = base ] && bin=build-base/fp4moe
  timeout 60 $bin bench --tp 8 --tokens 64 512 --iters 30 > $L/dec-$b-tp8-r$r.log 2>&1
  echo "dec r$r $b tp8: $(awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "T%s layer %s graph %s  ", $1, $8, $9}' $L/dec-$b-tp8-r$r.log)"
done; done
NCU=/usr/local/cuda/bin/ncu
timeout 120 $NCU --kernel-name-base demangled -k "regex:MoeGemmWsConfig<.int.128," --launch-count 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  build-sm90/fp4moe bench --tokens 16384 --block-m 128 --no-graph --iters 5 > $L/ncu-full.txt 2>&1
grep -E "moe_gemm_ws|Duration|Compute \(SM\) Throughput|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|No Eligible|Stall Barrier|Stall Wait|Tensor \(All\)" $L/ncu-full.txt | head -30
cd $OUT && tar czf logs.tgz logs
