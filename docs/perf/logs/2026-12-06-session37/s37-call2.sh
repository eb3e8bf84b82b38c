#!/usr/bin/env bash
# Session 37 call 2 (as run, on the H100 that call 1 left warm): session 36's s36-call4.sh check of `bench --markdown`
# with 9884598's CLI alone, the full layer added; carry [".device/fp4moe-9884598"] (9884598's build-sm90/fp4moe).
mkdir -p $OUT/md
for s in tp8 ep8; do
  .device/fp4moe-9884598 bench --${s:0:2} 8 --tokens 1 2 16 512 --iters 20 --json $OUT/md/$s.json --markdown $OUT/md/$s.md \
    > $OUT/md/$s.log 2>&1
  echo "$s rc $?"; cat $OUT/md/$s.md
done
.device/fp4moe-9884598 bench --tokens 1 64 --iters 20 --json $OUT/md/full.json --markdown $OUT/md/full.md > $OUT/md/full.log 2>&1
echo "full rc $?"; cat $OUT/md/full.md
nvidia-smi --query-gpu=name --format=csv > $OUT/md/smi.txt
cd $OUT && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz .
