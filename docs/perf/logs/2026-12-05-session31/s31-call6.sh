#!/usr/bin/env bash
# Session 31, call 6 (the same H200, warm): call 3's ring-down experiment again, T=1..4. Carry [".device/bins-s31d.tgz"]
# (build-n = 65de5c7, build-r = experiment-direct-down-ring.patch on it). The command as run:
tar xzf .device/bins-s31d.tgz build-n/fp4moe build-r/fp4moe && . scripts/gpu-env && mkdir -p $OUT/logs && for r in 1 2; do for v in n r0 r1; do b=build-${v:0:1}; env=""; [ $v = r1 ] && env="FP4MOE_EXP_DOWN_RING=1"; for m in glm5 deepseek-v3 qwen3-235b; do log=$OUT/logs/dec-$v-$m-$r.log; env $env timeout 60 $b/fp4moe bench --model $m --tp 8 --tokens 1 2 3 4 --iters 20 > $log 2>&1; echo "$v r$r $m: $(grep -o 'T=[0-9]*: max\|[0-9.]* us per pass' $log | tr '\n' ' ' | sed 's/: max//g')"; done; done; done; cd $OUT && tar czf logs.tgz logs
