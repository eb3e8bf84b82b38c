#!/usr/bin/env python3
"""Roofline plot of fp4moe's MoE layer benchmark: measured points against the memory and compute roofs.

Reads the output of fp4moe_bench_moe (its text log: the 'measured:' line and the result table), draws
TFLOP/s against arithmetic intensity (FLOP per byte of NVFP4 weights read), with the memory roof at the
measured read bandwidth and the compute roof at the measured cuBLAS bf16 rate, each point labelled with its
tokens per step and tokens per active expert. Usage: roofline.py BENCH_LOG OUT.png [--title TEXT]
"""
import argparse
import re
import sys


def parse(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"measured: read (\d+) GB/s.*?cuBLAS bf16 8192\^3 (\d+) TFLOP/s", text)
    if not m:
        sys.exit(f"{path}: no 'measured:' line (is it fp4moe_bench_moe output?)")
    read_gbs, peak = float(m.group(1)), float(m.group(2))
    dev = re.search(r"device: ([^,]+)", text)
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 12 and f[0].isdigit() and f[1].isdigit() and f[2].isdigit() and f[10].endswith("%"):
            T, active, bm = int(f[0]), int(f[1]), int(f[2])
            layer_us, tflops = float(f[7]), float(f[11])
            rows.append({"T": T, "active": active, "block_m": bm, "layer_us": layer_us, "tflops": tflops})
    if not rows:
        sys.exit(f"{path}: no result rows found")
    return (dev.group(1) if dev else "GPU"), read_gbs, peak, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    ap.add_argument("--top-k", type=int, default=8)
    a = ap.parse_args()
    device, read_gbs, peak, rows = parse(a.log)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("matplotlib is needed (Debian: apt-get install python3-matplotlib)")
    bw = read_gbs / 1e3  # TB/s
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    xs = [0.5, 5000]
    ridge = peak / bw
    ax.plot([xs[0], ridge], [bw * xs[0], peak], color="tab:blue", lw=2,
            label=f"memory roof: {read_gbs:.0f} GB/s measured read")
    ax.plot([ridge, xs[1]], [peak, peak], color="tab:red", lw=2, label=f"compute roof: cuBLAS bf16 {peak:.0f} TFLOP/s")
    for i, r in enumerate(rows):
        # 2 FLOP per weight per token row; bytes = active experts' weights at 0.5625 B per weight.
        ai = 2.0 * r["T"] * a.top_k / (r["active"] * 0.5625)
        ax.scatter([ai], [r["tflops"]], color="black", zorder=3)
        per_expert = r["T"] * a.top_k / r["active"]
        ax.annotate(f"T={r['T']} ({per_expert:.3g}/expert)", (ai, r["tflops"]), textcoords="offset points",
                    xytext=(6, -12) if i % 2 == 0 else (-10, 8), fontsize=8, ha="left" if i % 2 == 0 else "right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xs)
    ax.set_ylim(1, peak * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of NVFP4 weights incl. scales)")
    ax.set_ylabel("TFLOP/s (whole MoE layer)")
    ax.set_title(a.title or f"fp4moe NVFP4 MoE layer (GLM-5 shape) on {device}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.png)
    print(f"wrote {a.png}: {len(rows)} points, ridge at {ridge:.0f} FLOP/byte")


if __name__ == "__main__":
    main()
