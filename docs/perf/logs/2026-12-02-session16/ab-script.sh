#!/usr/bin/env bash
# Device call 1 (session 16): down starting on chunks as gate_up stores them (MoeChunkSync): the GPU tests, then an
# A/B against the previous binary (build-prev = b12f19e), alternated twice.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
  ls "$d"/libcublas.so* >/dev/null 2>&1 && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}" && break
done
t0=$(date +%s)
FP4MOE_FUZZ_CASES=100 timeout 200 build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $L/gpu-tests.log 2>&1; rc=$?
echo "gpu-tests rc $rc $(( $(date +%s) - t0 )) s"; tail -4 $L/gpu-tests.log; grep -B5 "FAILED  \]" $L/gpu-tests.log | head -30
[ $rc -ne 0 ] && { cd $OUT && tar czf logs.tgz logs; exit 0; }
summ() { awk '$1 ~ /^[0-9]+$/ && NF > 15 {printf "T%s bm%s gu %s dn %s layer %s graph %s | ", $1, $3, $6, $7, $8, $9}' "$1"; }
for r in 1 2; do for b in prev new; do
  bin=build-sm90/fp4moe; [ $b = prev ] && bin=build-prev/fp4moe
  timeout 90 $bin bench --tp 8 --tokens 8 16 32 64 128 --block-m 8 > $L/ab-$b-tp8-r$r.log 2>&1
  echo "r$r $b tp8 bm8: $(summ $L/ab-$b-tp8-r$r.log)"
  timeout 90 $bin bench --ep 8 --tokens 8 16 32 64 128 --block-m 8 > $L/ab-$b-ep8-r$r.log 2>&1
  echo "r$r $b ep8 bm8: $(summ $L/ab-$b-ep8-r$r.log)"
  timeout 90 $bin bench --tp 8 --tokens 512 > $L/ab-$b-tp8big-r$r.log 2>&1
  echo "r$r $b tp8 T512: $(summ $L/ab-$b-tp8big-r$r.log)"
  timeout 90 $bin bench --tokens 8 64 512 > $L/ab-$b-full-r$r.log 2>&1
  echo "r$r $b full: $(summ $L/ab-$b-full-r$r.log)"
  echo "  elapsed $(( $(date +%s) - t0 )) s"
done; done
cd $OUT && tar czf logs.tgz logs
