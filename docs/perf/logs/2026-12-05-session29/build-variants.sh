#!/usr/bin/env bash
# Session 29: build session 28's variant binaries from its patches, each into build-<name>/ (fp4moe and the GPU tests), then
# put the tree back; run from a checkout of 94738ea with build-sm90 configured (scripts/gpu-build). A record of the run.
set -euo pipefail
cd "$(dirname "$0")/../../../.."  # the repo root
export PATH=/usr/local/cuda/bin:$PATH
P=docs/perf/logs/2026-12-04-session28
mk() { # name patch...
  local name=$1; shift
  git checkout -q -- kernels src include tests
  for p in "$@"; do git apply "$P/$p"; done
  local t0=$(date +%s)
  cmake --build build-sm90 -j2 --target fp4moe_cli fp4moe_gpu_tests >/tmp/build-$name.log 2>&1 || { echo "BUILD FAIL $name"; tail -30 /tmp/build-$name.log; exit 1; }
  mkdir -p build-$name/tests
  cp build-sm90/fp4moe build-$name/; cp build-sm90/tests/fp4moe_gpu_tests build-$name/tests/
  echo "$name built in $(( $(date +%s) - t0 )) s"
}
for spec in "$@"; do
  case $spec in
    base) mk base ;;
    v1) mk v1 variant-block-shared-routing.patch ;;
    v0) mk v0 variant-block-shared-routing-gate-up-only.patch ;;
    v3) mk v3 variant-down-rows-multicast.patch ;;
    v7a) mk v7a variant-down-prefetch-later-batches.patch ;;
    v7b) mk v7b variant-down-prefetch-later-batches-early.patch ;;
    c) mk c candidate-direct-hot-lines.patch ;;
    tl) mk tl variant-block-shared-routing-timeline.patch ;;
    tl3) mk tl3 variant-down-rows-multicast-timeline.patch ;;
    tl0) mk tl0 ../2026-12-04-session27/variant-direct-timeline.patch ;;
    v6) mk v6 variant-vector-partial-stores.patch ;;
  esac
done
git checkout -q -- kernels src include tests
cmake --build build-sm90 -j2 --target fp4moe_cli fp4moe_gpu_tests >/dev/null 2>&1
