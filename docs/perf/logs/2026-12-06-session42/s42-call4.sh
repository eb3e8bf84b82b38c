#!/usr/bin/env bash
# Session 42, call 4: probe_partial_layout.cu (built here: nvcc -O3 -arch=sm_90a -std=c++17 -o
# .device/probe/probe_partial_layout probe_partial_layout.cu). carry [".device/probe/probe_partial_layout"].
nvidia-smi --query-gpu=name --format=csv,noheader; .device/probe/probe_partial_layout 2>&1 | tee $OUT/probe.log
