#!/usr/bin/env bash
# Build the CUTLASS truth probes (probe_sm120.cu, probe_builders.cu) host-only against the headers of the
# pinned FlashInfer wheels, run them and write their output to OUTFILE, the file that
# tests/unit/test_cutlass_truth.cc reads (FP4MOE_CUTLASS_TRUTH_FILE). Needs nvcc, no GPU.
#
# usage: run_truth.sh OUTFILE
# env:   FP4MOE_CUTLASS_HEADERS     cache directory for headers and probe binaries
#                                   (default $HOME/.cache/fp4moe/cutlass-headers)
#        FP4MOE_FLASHINFER_VERSIONS pinned wheels to probe (default "0.7.4 0.6.3": CUTLASS 4.5.0, 4.2.1)
#        NVCC                       nvcc to use (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
# Fails (non-zero, OUTFILE not written) if a download, build or probe fails, a probe's own checks
# fail, or a probe reports another CUTLASS version than its wheel pins. Probe binaries are cached
# by a hash of source, flags and nvcc version, so a second run only re-runs them.
# SPDX-License-Identifier: Apache-2.0
set -euo pipefail

OUT="${1:?usage: run_truth.sh OUTFILE}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${FP4MOE_CUTLASS_HEADERS:-$HOME/.cache/fp4moe/cutlass-headers}"
VERSIONS="${FP4MOE_FLASHINFER_VERSIONS:-0.7.4 0.6.3}"
if [[ -z "${NVCC:-}" ]]; then
  NVCC="$(command -v nvcc || true)"
  [[ -n "$NVCC" ]] || NVCC=/usr/local/cuda/bin/nvcc
fi
[[ -x "$NVCC" ]] || { echo "run_truth: nvcc not found (set NVCC)" >&2; exit 1; }

die() { echo "run_truth: $*" >&2; exit 1; }
cutlass_of() {
  case "$1" in
    0.7.4) echo 4.5.0 ;;
    0.6.3) echo 4.2.1 ;;
    *) die "flashinfer-python $1 is not pinned (known: 0.7.4, 0.6.3)" ;;
  esac
}

mkdir -p "$CACHE"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
NVCC_ID="$("$NVCC" --version | tail -n 2 | tr -d '\n')"
start=$SECONDS

for V in $VERSIONS; do
  CUTLASS="$(cutlass_of "$V")"
  HDR="$CACHE/flashinfer-$V"
  FLAGS="$(FLASHINFER_VERSION="$V" "$HERE/get_headers.sh" "$HDR" --flags)" || die "headers of flashinfer $V"

  # Build both probes in parallel (each is a single long nvcc front-end run), or reuse cached ones.
  pids=()
  bins=()
  for P in probe_sm120 probe_builders; do
    key="$( { cat "$HERE/$P.cu"; echo "$FLAGS"; echo "$NVCC_ID"; } | sha256sum | cut -c1-16)"
    BIN="$CACHE/bin/$P-$V-$key"
    bins+=("$BIN")
    if [[ ! -x "$BIN" ]]; then
      mkdir -p "$CACHE/bin"
      echo "run_truth: building $P against flashinfer $V (CUTLASS $CUTLASS)" >&2
      # shellcheck disable=SC2086  # FLAGS is a list of flags
      # Built next to its final name, then renamed: a concurrent run never sees a partial binary.
      "$NVCC" -std=c++17 -arch=sm_120a $FLAGS -o "$BIN.tmp$$" "$HERE/$P.cu" >"$TMP/$P-$V.log" 2>&1 &
      pids+=("$!:$P:$BIN")
    fi
  done
  for entry in "${pids[@]}"; do
    pid="${entry%%:*}"; rest="${entry#*:}"; P="${rest%%:*}"; BIN="${rest#*:}"
    if ! wait "$pid"; then
      cat "$TMP/$P-$V.log" >&2
      rm -f "$BIN.tmp$$"
      die "building $P against flashinfer $V failed"
    fi
    mv -f "$BIN.tmp$$" "$BIN"
    # Drop binaries of older sources or flags for this probe and wheel.
    for old in "$CACHE/bin/$P-$V-"*; do
      [[ "$old" == "$BIN" || "$old" == *.tmp* ]] || rm -f "$old"
    done
  done

  for BIN in "${bins[@]}"; do
    name="$(basename "$BIN")"
    if ! "$BIN" >"$TMP/$name.out" 2>&1; then
      cat "$TMP/$name.out" >&2
      die "$name failed (its own checks, see above)"
    fi
    n="$(grep -c '^TRUTH ' "$TMP/$name.out" || true)"
    [[ "$n" -gt 0 ]] || die "$name printed no TRUTH lines"
    if grep '^TRUTH ' "$TMP/$name.out" | grep -v " cutlass=$CUTLASS " >/dev/null; then
      die "$name reports another CUTLASS version than $CUTLASS (flashinfer $V)"
    fi
    cat "$TMP/$name.out" >>"$TMP/truth.txt"
  done
done

mkdir -p "$(dirname "$OUT")"
mv "$TMP/truth.txt" "$OUT"
echo "run_truth: $(grep -c '^TRUTH ' "$OUT") TRUTH lines for flashinfer $VERSIONS in $((SECONDS - start)) s -> $OUT" >&2
