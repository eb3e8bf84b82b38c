#!/usr/bin/env bash
# Session 45, call 1: session 44's call-1 script at HEAD (6f51159's code): every GPU test through scripts/gpu-suite's
# tests, nccl and python sections, then the TP8 and EP8 shards' benches with the run's own read probe and cuBLAS bf16.
# carry [".device/gpu.tgz"] (built by scripts/gpu-build with the wheel).
exec bash docs/perf/logs/2026-12-06-session44/s44-call1.sh "$@"
