#!/usr/bin/env bash
# Session 41, call 2: the build with only block 0 of gate_up's tail kernel waiting for the whole-tile kernel (call 1's
# b0, now in build-sm90: .device/gpu.tgz): its shard GPU tests; an A/B at T=64..128 against build-t128 (the same with
# the tail kernel allowed up to T=128 instead of 64: .device/t128.tgz) and against itself with --no-gate-up-tail,
# alternated twice, the 8-token tile; ncu of down at TP8 T=512 (the 32-token warp-specialized tile): warp states,
# instruction counts and the SASS listing with each instruction's executions and stall samples; then, on an H200, the
# shard tables with the time left. carry [".device/gpu.tgz", ".device/t128.tgz"].
set -uo pipefail
for a in .device/gpu.tgz .device/t128.tgz; do tar xzf $a; done
. scripts/gpu-env
LIMIT=${FP4MOE_CALL_LIMIT:-580}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
timeout 150 build-sm90/tests/fp4moe_gpu_tests --gtest_filter='MoeShards.*:PlannerGpu.*:MoeDirect.*' > $OUT/gpu-tests.log 2>&1
echo "tests rc $? [$SECONDS s]"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/gpu-tests.log | head -20
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in b0 no t128; do
    bin=build-sm90/fp4moe; [ $v = t128 ] && bin=build-t128/fp4moe
    flag=(); [ $v = no ] && flag=(--no-gate-up-tail)
    for s in tp8 ep8; do
      a="--tp 8"; [ $s = ep8 ] && a="--ep 8"
      FP4MOE_PRINT_PLANS=1 $bin bench $a --tokens 48 64 80 96 112 128 --block-m 8 --iters 20 "${flag[@]}" \
        --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$s-$v-$r $(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
NCU=/usr/local/cuda/bin/ncu; [ -x $NCU ] || NCU=$(command -v ncu)
timeout 150 $NCU --kernel-name-base mangled -k 'regex:moe_gemm_ws_kernel.*MoeEpilogueE1' --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --section SourceCounters --section LaunchStats -o $OUT/ncu-down-tp8-512 \
  build-sm90/fp4moe bench --tp 8 --tokens 512 --block-m 32 --iters 5 --no-graph > $OUT/ncu-down-tp8-512.txt 2>&1
echo "ncu rc $? [$SECONDS s]"
$NCU -i $OUT/ncu-down-tp8-512.ncu-rep --page details > $OUT/ncu-down-tp8-512-details.txt 2>&1
$NCU -i $OUT/ncu-down-tp8-512.ncu-rep --page source --print-source sass --csv > $OUT/ncu-down-tp8-512-sass.csv 2>&1
echo "sass csv $(wc -l < $OUT/ncu-down-tp8-512-sass.csv) lines"
grep -E "Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Ipc|Registers Per" \
  $OUT/ncu-down-tp8-512-details.txt | head -12
if grep -q H200 $OUT/smi.txt; then
  for s in tp8 ep8; do
    a="--tp 8"; [ $s = ep8 ] && a="--ep 8"
    left=$(( LIMIT - SECONDS )); [ $left -gt 40 ] || break
    timeout $left build-sm90/fp4moe bench $a --tokens 1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 \
      --json $OUT/bench-$s.json --markdown $OUT/bench-$s.md > $OUT/bench-$s.log 2>&1
    echo "bench $s rc $? [$SECONDS s]"
  done
fi
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
