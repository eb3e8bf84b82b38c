#!/usr/bin/env bash
# Session 41, call 3: mbarrier waits with a suspend-time hint (mbarrier.try_wait's suspendTimeHint, 10 ms: the warp
# sleeps until the phase completes instead of spinning; build-hint/fp4moe in .device/hint.tgz, on top of 48ada9f)
# against 48ada9f (build-sm90 in .device/gpu.tgz), alternated twice, each at the layer's own pick: TP8 and EP8 at
# T=1..4096, the full layer at T=1..2048, each run's chain per pass printed; then ncu of down at TP8 T=512 (block_m 32)
# for the hint build (its retry loops: call 2 counted 6.7 M spin instructions, 12% of the kernel's).
# carry [".device/gpu.tgz", ".device/hint.tgz"].
set -uo pipefail
for a in .device/gpu.tgz .device/hint.tgz; do tar xzf $a; done
. scripts/gpu-env
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
cat $OUT/smi.txt
L=$OUT/ab; mkdir -p $L
for r in 1 2; do
  for v in head hint; do
    bin=build-sm90/fp4moe; [ $v = hint ] && bin=build-hint/fp4moe
    for s in tp8 ep8 full; do
      case $s in tp8) a="--tp 8"; t="1 2 8 16 64 128 256 512 1024 2048 4096";;
                 ep8) a="--ep 8"; t="1 2 8 16 64 128 256 512 1024 2048 4096";; full) a=""; t="1 8 64 512 2048";; esac
      $bin bench $a --tokens $t --iters 20 --json $L/$s-$v-$r.json > $L/$s-$v-$r.log 2>&1
      echo "$s-$v-$r $(scripts/bench-summary $L/$s-$v-$r.log | cut -d'|' -f1) [$SECONDS s]"
    done
  done
done
NCU=/usr/local/cuda/bin/ncu; [ -x $NCU ] || NCU=$(command -v ncu)
timeout 120 $NCU --kernel-name-base mangled -k 'regex:moe_gemm_ws_kernel.*MoeEpilogueE1' --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  build-hint/fp4moe bench --tp 8 --tokens 512 --block-m 32 --iters 5 --no-graph > $OUT/ncu-down-tp8-512-hint.txt 2>&1
echo "ncu rc $? [$SECONDS s]"
grep -E "Duration|DRAM Throughput|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Issued Warp" $OUT/ncu-down-tp8-512-hint.txt | head
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
