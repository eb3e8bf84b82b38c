#!/usr/bin/env python3
# Summarises `ncu --csv --metrics ...` output of fp4moe's kernels: per kernel name, the median launch's time, DRAM
# bytes, issue activity and stall reasons (the tables in docs/perf cite its output).
# SPDX-License-Identifier: Apache-2.0
#
# Usage: ncu_summary.py FILE_OR_FOLDER...   (folders: every *.csv in them)
import collections
import csv
import glob
import os
import re
import sys

_SCALE = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "ns": 1e-3, "nsecond": 1e-3, "us": 1.0,
          "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def summarise(path):
    rows = list(csv.DictReader(line for line in open(path) if line.startswith('"')))
    launches = collections.OrderedDict()
    for r in rows:
        launches.setdefault((r["ID"], r["Kernel Name"]), {})[r["Metric Name"]] = (
            r["Metric Value"].replace(",", ""), r["Metric Unit"])
    by_name = collections.OrderedDict()
    for (_, name), m in launches.items():
        by_name.setdefault(name, []).append(m)
    print("==", path)
    for name, ms in by_name.items():
        ms.sort(key=lambda m: float(m["gpu__time_duration.sum"][0]))
        m = ms[len(ms) // 2]

        def val(metric, scaled=False):
            v, unit = m.get(metric, ("nan", ""))
            return float(v) * _SCALE.get(unit, 1.0) if scaled else v

        print(f"n={len(ms)} t={val('gpu__time_duration.sum', True):.1f}us "
              f"rd={val('dram__bytes_read.sum', True):.1f}MB wr={val('dram__bytes_write.sum', True):.1f}MB "
              f"L2={val('lts__t_bytes.sum', True):.0f}MB dram%={val('dram__throughput.avg.pct_of_peak_sustained_elapsed')} "
              f"issue%={val('smsp__issue_active.avg.pct_of_peak_sustained_active')} "
              f"warps={val('sm__warps_active.avg.per_cycle_active')} elig={val('smsp__warps_eligible.avg.per_cycle_active')} "
              f"grid={val('launch__grid_size')} regs={val('launch__registers_per_thread')}")
        print("   ", re.sub(r"MoeGemmParams.*", "", re.sub(r"fp4moe::|kernels::", "", name))[:120])
        stalls = {k.split("stalled_")[1].split(".")[0]: float(v[0]) for k, v in m.items() if "stalled_" in k}
        if stalls:
            print("    stalls", {k: round(v) for k, v in sorted(stalls.items(), key=lambda x: -x[1]) if v > 20})


def main(args):
    if not args:
        print(__doc__ or "usage: ncu_summary.py FILE_OR_FOLDER...", file=sys.stderr)
        return 2
    for a in args:
        for f in sorted(glob.glob(os.path.join(a, "*.csv"))) if os.path.isdir(a) else [a]:
            summarise(f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
