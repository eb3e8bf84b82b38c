#!/usr/bin/env bash
# Session 41, call 8: the warp-specialized consumers of the 16-, 32- and 64-token tiles read the next stage's weights
# and scales once the current stage's last group is issued (after waiting for that stage's full barrier), instead of
# at the next stage's start (variant-ws-next-stage-loads.patch: build-nx/fp4moe in .device/nx.tgz), against HEAD
# (build-sm90, .device/gpu.tgz), alternated twice, the layer's own pick: TP8, EP8 and the full layer at T=256..1024.
# carry [".device/gpu.tgz", ".device/nx.tgz"].
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/gpu.tgz .device/nx.tgz
V_NAMES=(head nx)
declare -A V_BIN=([head]=build-sm90/fp4moe [nx]=build-nx/fp4moe) V_FLAGS=() V_ENV=()
S_NAMES=(tp8 ep8 full)
declare -A S_ARGS=([tp8]="--tp 8" [ep8]="--ep 8" [full]="")
declare -A S_TOKENS=([tp8]="256 384 512 768 1024" [ep8]="256 384 512 768 1024" [full]="256 384 512 768 1024")
AB_ARGS="--iters 20" AB_CUT=-c1-330 s41_ab
s41_pack
