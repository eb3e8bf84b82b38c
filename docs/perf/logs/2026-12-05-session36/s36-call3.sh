#!/usr/bin/env bash
# Session 36 call 3 (an H100, warm after call 2): scripts/gpu-suite's bench, shards, tune, report, quantize and zipf
# sections of HEAD's build with every T of the tables (call 1's suite part, run as one command on the device).
tar xzf .device/gpu.tgz && FP4MOE_SUITE="bench shards tune report quantize zipf" FP4MOE_TOKENS="1 2 8 64 256 512 1024 2048 4096 8192 16384" FP4MOE_SHARD_TOKENS="1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" TAIL=2 timeout 400 scripts/gpu-suite; echo "suite rc $? at $SECONDS s"; cd $OUT && tar czf /tmp/all.tgz --exclude=site . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
