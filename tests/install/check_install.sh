#!/usr/bin/env bash
# Installs a configured fp4moe build into a temporary prefix and builds and runs the consumer projects beside
# this script against it with find_package(fp4moe): nothing of the source or build tree on their include paths.
# Usage: check_install.sh CMAKE BUILD_DIR THIS_DIR host|cuda NVCC CXX [FLAGS] (FLAGS: the sanitizers the library
# was built with, for the consumers' compile and link)
# SPDX-License-Identifier: Apache-2.0
set -euo pipefail
cmake=$1 build=$2 here=$3 kind=$4 nvcc=${5:-} cxx=${6:-c++} flags=${7:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
for f in include/fp4moe/moe.h include/fp4moe/planner.h include/fp4moe/version.h lib/cmake/fp4moe/fp4moeConfig.cmake; do
  [ -f "$tmp/prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
if [ -d "$tmp/prefix/include/fp4moe" ] && ls "$tmp/prefix/include" | grep -qv '^fp4moe$'; then
  echo "FAIL: the install puts headers outside include/fp4moe: $(ls "$tmp/prefix/include")"; exit 1
fi
consumers=(consumer_host)
[ "$kind" = cuda ] && consumers+=(consumer_cuda)
for c in "${consumers[@]}"; do
  args=(-S "$here/$c" -B "$tmp/$c" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_CXX_COMPILER="$cxx"
        -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags")
  [ "$c" = consumer_cuda ] && args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
  "$cmake" "${args[@]}" >"$tmp/$c.configure.log" 2>&1 || { cat "$tmp/$c.configure.log"; exit 1; }
  "$cmake" --build "$tmp/$c" -j2 >"$tmp/$c.build.log" 2>&1 || { cat "$tmp/$c.build.log"; exit 1; }
  out=$("$tmp/$c/consumer") || { echo "FAIL: $c exited non-zero: $out"; exit 1; }
  echo "$c: $out"
done
echo "ok: installed into a temporary prefix; ${consumers[*]} built and ran against it"
