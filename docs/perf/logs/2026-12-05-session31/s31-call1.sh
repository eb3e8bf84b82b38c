#!/usr/bin/env bash
# Prepared in session 30 (its device time ran out before this call could start; not run yet). Four things, one call:
# 1. The GPU tests of the final rule at HEAD (the finalize plain after a prefill tile only where I <= 256, sm_90;
#    session 30's call 2 ran the tests of its first version, which also took I > 256; e3c8965's graph-edge check is new) and its TP8 prefill A/B on an H200 against
#    45a08aa's launches (call 2's A/B ran on an H100).
# 2. Whether issuing bulk copies holds the direct gate_up's start (TP8 T=1: warp 0's six copies go out 1.0 us after the
#    ids arrive; 16 warps an SM issue 96): the timeline (variant-direct-timeline-ids.patch of session 29) on HEAD
#    (build-tl2h), with the tokens' rows never copied (build-tlnox: variant-direct-gate-up-no-x-timing-only.patch, 4 of
#    6 copies, wrong results, timing only), and with the K range in one piece (build-tlp1:
#    variant-direct-gate-up-one-piece.patch, 3 copies, correct). If "copies issued" moves by about a third of 1.0 us
#    with a third fewer copies, the copy count is the cost.
# 3. That change, built: the tokens' rows by the lanes' own 16-byte cp.async while the ids are in flight, not by bulk
#    copies (variant-direct-gate-up-rows-by-lanes.patch, correct): build-rl (its GPU tests and the chained pass at T=1
#    and 2 against build-n, alternated twice) and build-tlrl (the same with the timeline).
# 4. Why the direct kernels' fixed steps take as long as they do (gate_up's routing 1.1 us for 8 pairs, where its
#    shuffles should take a few hundred cycles): ncu's warp states of both direct kernels at TP8 T=1 (HEAD), to see
#    whether "no instruction" (a cold instruction cache at each launch) or the shuffles' dependencies hold them.
# Binaries, from a checkout of HEAD with build-sm90 configured (scripts/gpu-build), in this folder's patches' order:
#   D=docs/perf/logs/2026-12-05-session30; S=docs/perf/logs/2026-12-05-session29
#   mkdir -p build-n && cp build-sm90/fp4moe build-sm90/tests/fp4moe_gpu_tests build-n/
#   git apply $S/variant-direct-timeline-ids.patch && cmake --build build-sm90 --target fp4moe_cli && mkdir -p build-tl2h && cp build-sm90/fp4moe build-tl2h/ && git checkout kernels src
#   for v in tlnox:variant-direct-gate-up-no-x-timing-only tlp1:variant-direct-gate-up-one-piece; do git apply $D/${v#*:}.patch
#     cmake --build build-sm90 --target fp4moe_cli && mkdir -p build-${v%%:*} && cp build-sm90/fp4moe build-${v%%:*}/; git checkout kernels src; done
#   git apply $D/variant-direct-gate-up-rows-by-lanes.patch && cmake --build build-sm90 --target fp4moe_cli fp4moe_gpu_tests && mkdir -p build-rl && cp build-sm90/fp4moe build-sm90/tests/fp4moe_gpu_tests build-rl/ && git checkout kernels
#   build-tlrl: the timeline patch, then the rows-by-lanes edit by hand (the two patches overlap in copy_piece's calls;
#   python3 $D/rows-by-lanes-edit.py after the timeline patch)
#   build-x: 45a08aa's fp4moe (git worktree of 45a08aa, scripts/gpu-build there) -- or session 29's experiment build
#   (experiment-pdl-off-mask.patch on 45a08aa), whose launches without FP4MOE_EXP_PDL_OFF are 45a08aa's.
#   tar czf .device/bins-s31.tgz build-n/fp4moe build-n/fp4moe_gpu_tests build-x/fp4moe build-tl2h/fp4moe build-tlnox/fp4moe \
#     build-tlp1/fp4moe build-rl/fp4moe build-rl/fp4moe_gpu_tests build-tlrl/fp4moe
#   cp docs/perf/logs/2026-12-05-session30/next-call.sh .device/
# Run: carry [".device/bins-s31.tgz", ".device/next-call.sh"], bash .device/next-call.sh (about 5 minutes).
set -uo pipefail
. scripts/gpu-env
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
tar xzf .device/bins-s31.tgz
L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf logs.tgz logs' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $L/smi.txt 2>&1
for b in n rl; do
  FP4MOE_FUZZ_CASES=60 timeout 150 build-$b/fp4moe_gpu_tests > $L/gpu-tests-$b.log 2>&1; echo "$b gpu tests rc=$? ($(el)s): $(grep -h 'PASSED\|FAILED\|tests from .* ran' $L/gpu-tests-$b.log | tr '\n' ' ')"
done
s() { grep -o 'T=[0-9]*: max\|layer ([0-9.]* us)\|without programmatic launch [0-9.]* us ([-+0-9.%]*)\|programmatic dependent too [0-9.]* us ([-+0-9.%]*)\|[0-9.]* us per pass' "$1" | tr '\n' ' ' | sed 's/: max//g; s/without programmatic launch/noPDL/g; s/programmatic dependent too/finPDL/g'; }
for r in 1 2; do
  for b in n x; do
    timeout 60 build-$b/fp4moe bench --tp 8 --tokens 2048 4096 8192 16384 --block-m 64 128 --no-graph --iters 10 > $L/pf-tp8-$b-$r.log 2>&1
    echo "$b r$r tp8 ($(el)s): $(s $L/pf-tp8-$b-$r.log)"
  done
done
for r in 1 2; do
  for b in n rl; do
    for a in "--tp 8" "--ep 8"; do
      tag=$(echo "$a" | tr -d ' -'); timeout 40 build-$b/fp4moe bench $a --tokens 1 2 3 --iters 20 > $L/dec-$b-$tag-$r.log 2>&1
      echo "$b r$r $a ($(el)s): $(s $L/dec-$b-$tag-$r.log)"
    done
  done
done
for r in 1 2; do
  for b in tl2h tlnox tlp1 tlrl; do
    for a in "--tp 8 --tokens 1" "--ep 8 --tokens 1" "--tp 8 --tokens 2"; do
      tag=$(echo "$a" | tr -d ' -'); log=$L/$b-$tag-$r.log
      FP4MOE_EXP_TIMELINE=1 timeout 40 build-$b/fp4moe bench $a --iters 20 > $log 2>&1
      # (the fourth timeline a log prints is the main layer's last pass: layers print at destruction, the main one last)
      echo "$b r$r $a ($(el)s): $(s $log) | $(awk '/^timeline \(/{n++} n==4' $log | grep 'ids arrived\|copies issued\|gu routed\|piece0\|gu stored\|dn end' | sed 's/^timeline \(.*[a-z0-9]\) *n=.* p50 *\([0-9.]*\).*/\1 \2;/' | tr -s ' \n' ' ')"
    done
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 120 $NCU --clock-control none --cache-control none -k 'regex:moe_direct' -s 40 -c 4 --section WarpStateStats \
  --section SchedulerStats --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' build-n/fp4moe bench --tp 8 --tokens 1 --iters 20 --no-graph > $L/ncu-direct-tp8-t1.txt 2>&1
echo "ncu rc $? ($(el)s): $(grep -E 'moe_direct|stalled_(no_instruction|wait|short_scoreboard|long_scoreboard|barrier|branch_resolving)|Warp Cycles Per Issued' $L/ncu-direct-tp8-t1.txt | head -20 | tr -s ' ' | tr '\n' ';')"
