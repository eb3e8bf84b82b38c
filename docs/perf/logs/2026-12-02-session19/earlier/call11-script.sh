#!/usr/bin/env bash
# Session 19 call 11: GPU tests of build-tail (tail split after at most one whole round, counters cleared by the
# routing kernel), then an A/B against build-new (386b733) alternated twice: TP8, EP8 at T=12 16 20 24 64; full T=8 16 64.
# It ran call10-script.sh (made from it with sed) with this one line changed, the shapes' token lists:
#     for s in "tp8 --tp 8 --tokens 12 16 20 24 64" "ep8 --ep 8 --tokens 12 16 20 24 64" "full --tokens 8 16 64"; do
