#!/usr/bin/env bash
# CLI test: every bad invocation exits with the scheme's code (2: the command line is wrong, 1: the work failed)
# and exactly one line on stderr starting "error:"; good ones exit 0. Usage: check_cli.sh PATH/TO/fp4moe
# SPDX-License-Identifier: Apache-2.0
set -u
tool=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
bad() {  # expected-code args...: that exit code, one line on stderr starting "error:"
  local want=$1; shift
  local err rc
  err=$("$tool" "$@" 2>&1 >/dev/null); rc=$?
  local lines=$(printf '%s' "$err" | grep -c '')
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || [[ "$err" != error:* ]]; then
    echo "FAIL: fp4moe $* -> rc $rc (want $want), stderr: $err"; fail=1
  else
    echo "ok:   fp4moe $* -> rc $rc: $err"
  fi
}
good() {
  if ! "$tool" "$@" >/dev/null 2>&1; then echo "FAIL: fp4moe $* exited non-zero"; fail=1; else echo "ok:   fp4moe $*"; fi
}
check() {  # description, condition (a command)
  local what=$1; shift
  if "$@"; then echo "ok:   $what"; else echo "FAIL: $what"; fail=1; fi
}
# Usage errors: 2.
bad 2 plan --bogus
bad 2 plan --arch sm_75
bad 2 plan --arch
bad 2 plan --gpu TPU
bad 2 plan --model llama
bad 2 plan --tile 16x128
bad 2 plan --tile 12x128x256
bad 2 plan --tile 16x100x256
bad 2 plan --tile 16x128x96
bad 2 plan --tile axbxc
bad 2 plan --tile 99999999999x128x256
bad 2 plan --stages abc
bad 2 plan --stages 0
bad 2 plan --epilogue sideways
bad 2 plan --cutlass 3.1
bad 2 plan --floors --tokens 0
bad 2 nosuchcommand
bad 2 report --model llama
bad 2 bench --routing foo
bad 2 bench --down-k-splits 3
bad 2 bench --finalize fp16
bad 2 bench --time-at slowest
bad 2 tune --finalize fp32
bad 2 tune --max-tokens 0
bad 2 report --tune-budget-s 0
# Preset, GPU and arch names: empty, non-ASCII, punctuation-only and ambiguous names are errors.
bad 2 plan --model ""
bad 2 plan --model "glm5é"
bad 2 plan --model "🙂"
bad 2 plan --gpu '!!!'
bad 2 plan --model qwen3
bad 2 plan --model g
good plan --gpu "NVIDIA H200"
good plan --gpu "NVIDIA GeForce RTX 4090"
good plan --gpu "DGX Spark"
# NaN is not a number in range.
bad 2 report --tune-budget-s nan
bad 2 tune --budget-s nan
bad 2 bench --zipf-s nan
bad 2 bench --zipf-s inf
# quantize-check: sizes are bounded before anything is allocated.
bad 2 quantize-check --k 15
bad 2 quantize-check --rows -4
bad 2 quantize-check --row-exp 99
bad 2 quantize-check --rows 4294967296 --k 4294967296
bad 2 quantize-check --rows 9223372036854775807 --k 16
bad 2 quantize-check --rows 1 --k 1152921504606846976
bad 2 quantize-check --rows 1000000 --k 16384
# Options that do not go together are refused, never ignored.
bad 2 plan --floors --arch sm_90
bad 2 plan --floors --gpu H200
bad 2 plan --floors --tile 16x128x256
bad 2 plan --floors --stages 3
bad 2 plan --floors --cutlass
bad 2 plan --epilogue finalize
bad 2 plan --tokens 8
bad 2 plan --arch sm_90 --gpu H200
out=$("$tool" plan --cutlass 3.1 2>/dev/null)
check "plan --cutlass 3.1 prints nothing but the error" test -z "$out"
check "plan --floors --json is JSON" sh -c "'$tool' plan --floors --json | python3 -c 'import json, sys; j = json.load(sys.stdin); assert j[\"floors\"]'"
# Shards and custom shapes.
good plan --tp 8
good plan --ep 8 --arch sm_120
good plan --shape 32,6144,256,8 --arch sm_90
good plan --model qwen3-235b --tp 8
good plan --shards
good plan --shards --json
good plan --floors --ep 8
bad 2 plan --tp 3
bad 2 plan --model qwen3-30b --tp 8
bad 2 plan --ep 7
bad 2 plan --shape 1,2,3
bad 2 plan --shape 32,6144,100,8
bad 2 plan --shards --tp 8
check "plan --tp 8 names the shard" sh -c "'$tool' plan --tp 8 --arch sm_90 | grep -q 'TP8 shard (E=256 H=6144 I=256 k=8)'"
check "plan --shards lists Qwen3-235B TP8 with the small-K down tile" sh -c "'$tool' plan --shards | grep 'qwen3-235b *TP8' | grep -q 'multistage 128x64'"
# Output files: checked before any work, written atomically, never over a device or a FIFO.
bad 2 report --out /nonexistent-dir/report.json
bad 2 report --out /dev/full --no-timing
check "report --out /dev/full left the device alone" test -c /dev/full
mkfifo "$tmp/fifo"
bad 2 report --out "$tmp/fifo" --no-timing
check "report --out FIFO left the FIFO alone" test -p "$tmp/fifo"
bad 2 bench --json /nonexistent-dir/bench.json
bad 2 bench --csv "$tmp/fifo"
bad 2 bench --markdown /nonexistent-dir/bench.md
# (an unknown option would also exit 2 with one error line: the error must be the path's)
for opt in --json --markdown; do
  check "bench $opt names the missing folder" sh -c "'$tool' bench $opt /nonexistent-dir/x 2>&1 | grep -q 'folder /nonexistent-dir does not exist'"
done
bad 2 tune --cache /dev/null
echo '{"old": true}' >"$tmp/report.json"
( ulimit -f 8; "$tool" report --no-timing --out "$tmp/report.json" >/dev/null 2>"$tmp/efbig.err" ); rc=$?
check "a report that hits the file size limit fails (rc $rc)" test "$rc" -eq 1
check "... and leaves the previous report whole" grep -q '"old": true' "$tmp/report.json"
check "... and no temporary file" test "$(ls "$tmp" | grep -c 'report.json.tmp')" -eq 0
# The main output must reach its destination.
err=$("$tool" plan --arch sm_90 2>&1 >/dev/full); rc=$?
check "plan > /dev/full fails with rc 1 and one error line (rc $rc: $err)" \
  test "$rc" -eq 1 -a "$(printf '%s' "$err" | grep -c '')" -eq 1 -a "${err#error: cannot write the output}" != "$err"
# Timing commands refuse in one line without a GPU (the work cannot be done here: 1).
if [ "$have_gpu" = 0 ]; then
  bad 1 bench
  bad 1 tune --cache "$tmp/tuning.json"
  bad 1 bench --plot "$tmp/it's a plot.png"
fi
good plan
good plan --arch sm_120 --cutlass --json
good plan --gpu "RTX PRO 6000" --tile 16x128x256 --stages 3
good plan --model kimi-k2 --cutlass=4.2.1 --epilogue finalize
good plan --floors --model qwen3-30b --tokens 64
good quantize-check --rows 16 --k 64
good --version
check "--version names the git hash and the CUDA targets" sh -c "'$tool' --version | grep -qE '^fp4moe [0-9.]+ \(git [0-9a-f]+.*CUDA (on, kernels for sm_|off)'"
if [ "$have_gpu" = 0 ]; then  # (with a GPU a plain report also tunes and benchmarks: minutes)
  good report --out "$tmp/fp4moe-cli-test-report.json"
fi
good report --no-timing --out "$tmp/fp4moe-cli-test-report.json"
exit $fail
