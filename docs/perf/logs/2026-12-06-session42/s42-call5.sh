#!/usr/bin/env bash
# Session 42, calls 5 and 6: the weights' copies with an L2 evict-first policy (FP4MOE_EXP_WEIGHT_EVICT_FIRST,
# variant-weight-evict-first.patch: the producer's cp.async of weights and scales; build-var) against HEAD's kernels
# (build-sm90/fp4moe, the same code without the macro), alternated twice, each shape at the layer's own block_m there;
# then ncu's DRAM bytes of the finalize at TP8 T=256 for both (L2 kept between kernels: --cache-control none). Call 6
# wrote the copy's src-size out (16, 16, policy); in both the variant stopped on an illegal instruction (call 7).
# carry [".device/ab.tgz"] (build-sm90/fp4moe and build-var/fp4moe).
set -uo pipefail
. docs/perf/logs/2026-12-06-session41/s41-lib.sh
s41_start .device/ab.tgz
declare -a V_NAMES=(base ef)
declare -A V_BIN=([base]=build-sm90/fp4moe [ef]=build-var/fp4moe) V_FLAGS=() V_ENV=()
declare -a S_NAMES=(tp8-128 tp8-256 tp8-512 ep8-256 ep8-512 full-512)
declare -A S_ARGS=([tp8-128]="--tp 8 --block-m 8" [tp8-256]="--tp 8 --block-m 16" [tp8-512]="--tp 8 --block-m 32"
                   [ep8-256]="--ep 8 --block-m 16" [ep8-512]="--ep 8 --block-m 32" [full-512]="--block-m 32")
declare -A S_TOKENS=([tp8-128]=128 [tp8-256]=256 [tp8-512]=512 [ep8-256]=256 [ep8-512]=512 [full-512]=512)
AB_CUT="-c1-220"
s41_ab
NCU_ARGS=(--cache-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum)
for v in base ef; do
  s41_ncu "ncu-finalize-tp8-256-$v" 120 "${V_BIN[$v]}" moe_finalize_gather --tp 8 --block-m 16 --tokens 256 --no-graph --iters 5
  grep -E "dram__bytes|gpu__time" "$OUT/ncu-finalize-tp8-256-$v.txt" | head -4
done
s41_pack
