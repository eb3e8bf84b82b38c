#!/usr/bin/env bash
# CLI test: every bad invocation exits non-zero with exactly one line on stderr starting "error:";
# good ones exit 0. Usage: check_cli.sh PATH/TO/fp4moe
# SPDX-License-Identifier: Apache-2.0
set -u
tool=$1
fail=0
bad() {  # args...
  local err rc
  err=$("$tool" "$@" 2>&1 >/dev/null); rc=$?
  local lines=$(printf '%s' "$err" | grep -c '')
  if [ "$rc" -eq 0 ] || [ "$lines" -ne 1 ] || [[ "$err" != error:* ]]; then
    echo "FAIL: fp4moe $* -> rc $rc, stderr: $err"; fail=1
  else
    echo "ok:   fp4moe $* -> rc $rc: $err"
  fi
}
good() {
  if ! "$tool" "$@" >/dev/null 2>&1; then echo "FAIL: fp4moe $* exited non-zero"; fail=1; else echo "ok:   fp4moe $*"; fi
}
bad plan --bogus
bad plan --arch sm_75
bad plan --arch
bad plan --gpu TPU
bad plan --model llama
bad plan --tile 16x128
bad plan --tile 12x128x256
bad plan --tile 16x100x256
bad plan --tile 16x128x96
bad plan --tile axbxc
bad plan --stages abc
bad plan --stages 0
bad plan --epilogue sideways
bad plan --cutlass 3.1
bad plan --floors --tokens 0
bad quantize-check --k 15
bad quantize-check --rows -4
bad quantize-check --row-exp 99
bad nosuchcommand
bad report --model llama
bad bench --routing foo
bad bench --down-k-splits 3
bad tune --max-tokens 0
if ! nvidia-smi -L >/dev/null 2>&1; then  # without a GPU the timing commands refuse in one line
  bad bench
  bad tune
fi
bad report --out /nonexistent-dir/report.json
good plan
good plan --arch sm_120 --cutlass --json
good plan --gpu "RTX PRO 6000" --tile 16x128x256 --stages 3
good plan --model kimi-k2 --cutlass=4.2.1 --epilogue finalize
good plan --floors --model qwen3-30b --tokens 64
good quantize-check --rows 16 --k 64
good --version
if ! nvidia-smi -L >/dev/null 2>&1; then  # (with a GPU a plain report also tunes and benchmarks: minutes)
  good report --out "${TMPDIR:-/tmp}/fp4moe-cli-test-report.json"
fi
good report --no-timing --out "${TMPDIR:-/tmp}/fp4moe-cli-test-report.json"
bad report --tune-budget-s 0
exit $fail
