#!/usr/bin/env bash
# Session 42, call 7: where the evict-first variant (variant-weight-evict-first.patch, build-var) stops: compute-sanitizer
# over one bench run. carry [".device/ab.tgz"].
tar xzf .device/ab.tgz && . scripts/gpu-env && SAN=/usr/local/cuda/bin/compute-sanitizer; [ -x "$SAN" ] || SAN=$(command -v compute-sanitizer); timeout 200 $SAN --tool memcheck --show-backtrace device build-var/fp4moe bench --tp 8 --block-m 16 --tokens 256 --no-graph --iters 5 2>&1 | head -40 | tee $OUT/san.log
