#!/usr/bin/env bash
# A bounded libFuzzer run of one target on a copy of its seed corpus (the seeds stay as they are in git).
# Usage: run_fuzz.sh FUZZER SEED_DIR SECONDS
# SPDX-License-Identifier: Apache-2.0
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$seeds"/. "$work"/
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 "$work" 2>&1 | tail -n 12
