#!/usr/bin/env bash
# Fetch a pinned flashinfer-python wheel and unpack only the headers the probes need
# (CUTLASS include/ and TensorRT-LLM's nv_internal/ sources, ~31 MB of the wheel).
# Idempotent: a stamp file marks a complete unpack; re-running just prints the paths.
#
# usage: get_headers.sh DEST_DIR [--flags]
#   prints the include directories, one per line; with --flags prints the nvcc flags instead:
#   nvcc -std=c++17 -arch=sm_120a $(get_headers.sh DIR --flags) -o probe_sm120 probe_sm120.cu
# env: FLASHINFER_VERSION  which pinned wheel: 0.7.4 (default, CUTLASS 4.5.0) or 0.6.3 (CUTLASS 4.2.1).
#        One DEST_DIR holds one version at a time; use one directory per version.
#      KEEP_WHEEL=1 keeps the downloaded .whl in DEST_DIR.
# SPDX-License-Identifier: Apache-2.0
set -euo pipefail

VERSION="${FLASHINFER_VERSION:-0.7.4}"
case "$VERSION" in
  0.7.4) SHA256=a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32 ;;  # CUTLASS 4.5.0, 101 MB
  0.6.3) SHA256=0fe2de934a4b3690c543dafb03f38d7bb4a762431abe8ae4f7292d6fef10c65d ;;  # CUTLASS 4.2.1, 7.6 MB
  *) echo "get_headers: flashinfer-python $VERSION is not pinned (known: 0.7.4, 0.6.3)" >&2; exit 2 ;;
esac
WHEEL="flashinfer_python-${VERSION}-py3-none-any.whl"

DEST="${1:?usage: get_headers.sh DEST_DIR [--flags]}"
MODE="${2:-}"
mkdir -p "$DEST"
DEST="$(cd "$DEST" && pwd)"
STAMP="$DEST/.flashinfer-python-${VERSION}.unpacked"
FI="$DEST/flashinfer/data"

if [[ ! -f "$STAMP" ]]; then
  if [[ ! -f "$DEST/$WHEEL" ]] || ! echo "$SHA256  $DEST/$WHEEL" | sha256sum -c --quiet - 2>/dev/null; then
    rm -f "$DEST/$WHEEL"
    echo "get_headers: downloading flashinfer-python==$VERSION" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      "flashinfer-python==$VERSION" -d "$DEST" >&2
  fi
  echo "$SHA256  $DEST/$WHEEL" | sha256sum -c --quiet - >&2 ||
    { echo "get_headers: sha256 mismatch for $WHEEL" >&2; exit 1; }
  rm -rf "$DEST/flashinfer" "$DEST"/.flashinfer-python-*.unpacked  # drop any partial or other unpack
  unzip -q -o "$DEST/$WHEEL" 'flashinfer/data/cutlass/include/*' \
    'flashinfer/data/csrc/nv_internal/*' -d "$DEST"
  [[ "${KEEP_WHEEL:-0}" == 1 ]] || rm -f "$DEST/$WHEEL"
  touch "$STAMP"
fi

INCLUDES=(
  "$FI/csrc/nv_internal"
  "$FI/csrc/nv_internal/include"
  "$FI/csrc/nv_internal/tensorrt_llm/cutlass_extensions/include"
  "$FI/cutlass/include"
)
if [[ "$MODE" == "--flags" ]]; then
  # The defines are the ones FlashInfer's SM120 fused-MoE JIT build passes (jit/fused_moe.py).
  printf '%s' "-DENABLE_BF16 -DENABLE_FP8 -DENABLE_FP4"
  printf ' -I%s' "${INCLUDES[@]}"
  printf '\n'
else
  printf '%s\n' "${INCLUDES[@]}"
fi
