#!/usr/bin/env bash
# Session 42, call 1: the test-audit mends (tests only; the library and kernels as faed2e7's). scripts/gpu-suite's
# tests and nccl sections (every C++ GPU and unit test, the one-rank NCCL tests), the Python tests against the source
# tree's package with the GPU test build's C ABI and CLI (no wheel: the package's code is unchanged), then three
# rounds of the TP8 and EP8 shards at T=2048 and 4096 (the issue-18 points) at the layer's pick there, the 128-token
# tile (--block-m 128), each run with its own read probe and cuBLAS.
# carry [".device/gpu.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session42/s42-lib.sh
s42_suite 8 300
s42_pytest
mkdir -p "$OUT/prefill"
for r in 1 2 3; do
  for s in tp8 ep8; do
    a="--tp 8"; [ $s = ep8 ] && a="--ep 8"
    # shellcheck disable=SC2086
    timeout 40 build-sm90/fp4moe bench $a --block-m 128 --tokens 2048 4096 --json "$OUT/prefill/$s-$r.json" > "$OUT/prefill/$s-$r.log" 2>&1
    echo "$s round $r rc $? [$SECONDS s]"; grep -E "^ +(2048|4096) " "$OUT/prefill/$s-$r.log" | cut -c1-150
  done
done
s41_pack
