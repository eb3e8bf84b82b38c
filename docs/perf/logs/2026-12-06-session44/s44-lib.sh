#!/usr/bin/env bash
# What the session-44 device scripts share (sourced by s44-call1.sh and s44-call2.sh from the repository root).

# s44_benches SECONDS: the TP8 and EP8 shards' benches at T = 1, 8, 64, 512 (each with its own read probe and cuBLAS
# bf16), each within SECONDS, their logs and Markdown tables in $OUT, the tables echoed.
s44_benches() {
  local s n
  for s in "tp 8" "ep 8"; do
    n=${s/ /}
    # shellcheck disable=SC2086  # (--tp 8 / --ep 8 split into words)
    timeout "$1" build-sm90/fp4moe bench --$s --tokens 1 8 64 512 --markdown "$OUT/bench-$n.md" > "$OUT/bench-$n.log" 2>&1
    echo "bench $n rc $? [$SECONDS s]"; cat "$OUT/bench-$n.md"
  done
}
