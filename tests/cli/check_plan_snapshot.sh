#!/usr/bin/env bash
# `fp4moe plan` for each line of FIXTURES/cases.txt equals FIXTURES/N.txt (line N): a change of the layout
# functions, the catalogue or the arch table shows up here. Usage: check_plan_snapshot.sh FP4MOE FIXTURES [--update]
# SPDX-License-Identifier: Apache-2.0
set -u
tool=$1 dir=$2 update=${3:-}
fail=0 n=0
while IFS= read -r line; do
  n=$((n + 1))
  eval "args=($line)"  # the fixture's own quoting (e.g. --gpu "RTX PRO 6000")
  out=$("$tool" "${args[@]}" 2>&1); rc=$?
  if [ "$update" = --update ]; then printf '%s\n' "$out" >"$dir/$n.txt"; continue; fi
  if [ "$rc" -ne 0 ]; then echo "FAIL: fp4moe $line exited $rc: $out"; fail=1; continue; fi
  if ! diff -u "$dir/$n.txt" <(printf '%s\n' "$out") >/tmp/plan-snapshot-diff.$$; then
    echo "FAIL: fp4moe $line differs from $dir/$n.txt:"; head -40 /tmp/plan-snapshot-diff.$$; fail=1
  else
    echo "ok:   fp4moe $line"
  fi
done <"$dir/cases.txt"
rm -f /tmp/plan-snapshot-diff.$$
[ "$update" = --update ] && echo "updated $n snapshots in $dir"
exit $fail
