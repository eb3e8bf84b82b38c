#!/usr/bin/env bash
# What the session-41 device scripts share (sourced by s41-callN.sh from the repository root on the device machine):
# unpacking the carried builds, the GPU's name and clocks, the shard GPU tests, alternated A/B rounds of
# `fp4moe bench`, one ncu profile, the shard tables, and packing $OUT into one archive. The progress lines they echo
# are worded as here; the commands are those the calls ran (checked against the scripts as run with stub binaries).

# s41_start ARCHIVE...: unpack the builds, put the toolkit's libraries on the path, record the GPU in $OUT/smi.txt
# (the fields in S41_SMI_FIELDS).
s41_start() {
  local a
  for a in "$@"; do tar xzf "$a"; done
  . scripts/gpu-env
  nvidia-smi --query-gpu="${S41_SMI_FIELDS:-name,clocks.sm,clocks.mem}" --format=csv > "$OUT/smi.txt" 2>&1
  cat "$OUT/smi.txt"
}

# s41_tests FILTER: build-sm90's GPU tests matching FILTER, their summary and the tail kernel test's lines.
s41_tests() {
  timeout 150 build-sm90/tests/fp4moe_gpu_tests --gtest_filter="$1" > "$OUT/gpu-tests.log" 2>&1
  echo "tests rc $? [$SECONDS s]"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$OUT/gpu-tests.log" | head -20
  grep -A2 "RUN.*GateUpTailPieces" "$OUT/gpu-tests.log" | head -6
}

# s41_ab: two rounds of every variant on every shape, alternated, each run's log and JSON in $OUT/ab and its
# bench-summary line echoed (cut by AB_CUT). The caller declares
#   V_NAMES (array), V_BIN, V_FLAGS, V_ENV (associative, by variant: binary, bench flags, environment),
#   S_NAMES (array), S_ARGS, S_TOKENS (associative, by shape), AB_ARGS (bench arguments for every run), AB_ENV.
s41_ab() {
  local L=$OUT/ab r v s
  mkdir -p "$L"
  for r in 1 2; do
    for v in "${V_NAMES[@]}"; do
      for s in "${S_NAMES[@]}"; do
        # shellcheck disable=SC2086  # (the lists split into words)
        env ${AB_ENV:-} ${V_ENV[$v]:-} "${V_BIN[$v]}" bench ${S_ARGS[$s]} --tokens ${S_TOKENS[$s]} ${AB_ARGS:-} \
          ${V_FLAGS[$v]:-} --json "$L/$s-$v-$r.json" > "$L/$s-$v-$r.log" 2>&1
        # shellcheck disable=SC2086
        echo "$s-$v-$r $(scripts/bench-summary "$L/$s-$v-$r.log" | cut ${AB_CUT:--d| -f1}) [$SECONDS s]"
      done
    done
  done
}

# s41_ncu NAME SECONDS BINARY KERNEL_REGEX BENCH_ARG...: ncu of the 4th launch of the kernels matching the regex (the
# sections and options in the array NCU_ARGS) while BINARY benches with the given arguments; its output in
# $OUT/NAME.txt. Sets NCU to the ncu found.
s41_ncu() {
  local name=$1 limit=$2 bin=$3 kernel=$4
  shift 4
  NCU=/usr/local/cuda/bin/ncu; [ -x "$NCU" ] || NCU=$(command -v ncu)
  timeout "$limit" "$NCU" --kernel-name-base mangled -k "regex:$kernel" --launch-skip 3 --launch-count 1 \
    "${NCU_ARGS[@]}" "$bin" bench "$@" > "$OUT/$name.txt" 2>&1
  echo "ncu $name rc $? [$SECONDS s]"
}

# s41_tables SECONDS: on an H200 only, the TP8 and EP8 tables of shards.md (Markdown and JSON in $OUT) at the layer's
# own pick, within SECONDS of the call's start.
s41_tables() {
  local s a left
  grep -q H200 "$OUT/smi.txt" || return 0
  for s in tp8 ep8; do
    a="--tp 8"; [ $s = ep8 ] && a="--ep 8"
    left=$(( $1 - SECONDS )); [ $left -gt 40 ] || break
    # shellcheck disable=SC2086
    timeout $left build-sm90/fp4moe bench $a --tokens 1 2 3 4 5 6 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 \
      --json "$OUT/bench-$s.json" --markdown "$OUT/bench-$s.md" > "$OUT/bench-$s.log" 2>&1
    echo "bench $s rc $? [$SECONDS s]"
  done
}

# s41_pack: $OUT as one archive (the device tool returns few files).
s41_pack() {
  cd "$OUT" && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && ls -la
}
