#!/usr/bin/env bash
# Session 37 call 3: gate_up's persistent grid trimmed so that its expected work items fill whole rounds (a host-side
# plan experiment: FP4MOE_EXP_GU_TRIM = the margin over the expected items; the kernels are 9884598's). One binary,
# the variable unset and 0.05, alternated twice: both shards at T=16..512 and the full layer at T=16, 64 (chain
# per pass at the layer's own pick; FP4MOE_PRINT_PLANS shows each plan's grid); then the GPU tests of the shards and the layer
# (MoeShards.*, MoeGpu.*) with the trim on, in the time left.
# Here first: FP4MOE_SKIP_WHEEL=1 scripts/gpu-build; carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
. scripts/gpu-env
L=$OUT/trim; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
LIMIT=${FP4MOE_CALL_LIMIT:-585}
for round in 1 2; do
  for shape in tp8 ep8 full; do
    case $shape in tp8) a=(--tp 8); t="16 32 64 128 512";; ep8) a=(--ep 8); t="16 32 64 128 512";; full) a=(); t="16 64";; esac
    order="off 0.05"; [ $round = 2 ] && order="0.05 off"
    for v in $order; do
      [ $SECONDS -gt $((LIMIT - 90)) ] && break 3
      if [ $v = off ]; then env -u FP4MOE_EXP_GU_TRIM FP4MOE_PRINT_PLANS=1 build-sm90/fp4moe bench "${a[@]}" --tokens $t --iters 20 > $L/$shape-$v-$round.log 2>&1
      else FP4MOE_EXP_GU_TRIM=$v FP4MOE_PRINT_PLANS=1 build-sm90/fp4moe bench "${a[@]}" --tokens $t --iters 20 > $L/$shape-$v-$round.log 2>&1; fi
      echo "$(scripts/bench-summary $L/$shape-$v-$round.log | cut -c1-200) [$SECONDS s]"
    done
  done
done
echo "=== tests at $SECONDS s"
FP4MOE_EXP_GU_TRIM=0.05 timeout $((LIMIT - SECONDS - 10)) build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 \
  --gtest_filter="MoeShards.*:MoeGpu.*" > $L/gpu-tests-trim.log 2>&1
echo "gpu-tests (trim 0.05) rc $?"; tail -4 $L/gpu-tests-trim.log
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
