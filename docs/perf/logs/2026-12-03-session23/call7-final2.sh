#!/usr/bin/env bash
# Session 23 call 7: the fixed Python test with the wheel, then TP8 T=1..8 with the cluster decode kernel (default) and
# without it (--no-cluster-decode), alternated twice: the table of the committed binary.
set -uo pipefail
B=${1:?usage: final2.sh BUILD_DIR}
. scripts/gpu-env
L=$OUT/logs; mkdir -p $L
SITE=$OUT/site
python3 -m pip install -q --no-index --no-deps --target $SITE dist/fp4moe-*.whl > $L/py-install.log 2>&1
PYTHONPATH=$SITE timeout 200 python3 -m pytest -q -rs -p no:cacheprovider python/tests > $L/py-tests.log 2>&1
echo "pytest rc $? $(tail -1 $L/py-tests.log)"
grep -E 'FAILED|Error' $L/py-tests.log | head -10
for r in 1 2; do
  for v in cluster tiled; do
    f=""; [ $v = tiled ] && f=--no-cluster-decode
    timeout 100 $B/fp4moe bench --tp 8 --tokens 1 2 3 4 5 6 8 --iters 30 $f > $L/tp8-$v-$r.log 2>&1
    echo "$v$r rc $? $(scripts/bench-summary $L/tp8-$v-$r.log)"
  done
done
rm -rf $SITE
cd $OUT && tar czf logs.tgz logs
