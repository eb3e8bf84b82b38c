#!/usr/bin/env bash
# Session 38 call 4: HEAD's build (the review mend 3f995a3 never ran on a GPU). On an H200: scripts/gpu-suite's bench
# and shards sections at the shards' full T list (shards.md's H200 tables, the issue-16 target table), in the time
# left; elsewhere: TP8 and EP8 at T=1, 2, 16, 512 with --json and --markdown (the table checked
# against the JSON here), then every GPU test in the time left. Here first: FP4MOE_SKIP_WHEEL=1 scripts/gpu-build; carry [".device/gpu.tgz"].
set -uo pipefail
tar xzf .device/gpu.tgz
. scripts/gpu-env
LIMIT=${FP4MOE_CALL_LIMIT:-480}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
if grep -q H200 $OUT/smi.txt; then
  FP4MOE_SUITE="shards bench" \
  FP4MOE_TOKENS="1 8 64 512 2048 16384" \
  FP4MOE_SHARD_TOKENS="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" \
    timeout $((LIMIT - SECONDS - 15)) scripts/gpu-suite
  echo "suite rc $? at $SECONDS s"
else
  mkdir -p $OUT/md
  for s in tp8 ep8; do
    build-sm90/fp4moe bench --${s:0:2} 8 --tokens 1 2 16 512 --iters 20 --json $OUT/md/$s.json --markdown $OUT/md/$s.md \
      > $OUT/md/$s.log 2>&1
    echo "$s rc $?"; cat $OUT/md/$s.md
  done
  timeout $((LIMIT - SECONDS - 15)) build-sm90/tests/fp4moe_gpu_tests --gtest_brief=1 > $OUT/gpu-tests.log 2>&1
  echo "gpu-tests rc $? at $SECONDS s"; tail -3 $OUT/gpu-tests.log
fi
cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
