#!/usr/bin/env python3
# Roofline plot of fp4moe's MoE layer benchmark: measured points against the memory and compute roofs.
# SPDX-License-Identifier: Apache-2.0
"""Reads the benchmark's JSON (what `fp4moe bench --json` writes; `fp4moe bench --plot` pipes it in on standard
input) and draws TFLOP/s against arithmetic intensity (FLOP per byte of NVFP4 weights read), with the memory roof
at the measured read bandwidth and the compute roof at the measured cuBLAS bf16 rate, each point labelled with its
tokens per step and tokens per active expert. Usage: roofline.py BENCH.json|- OUT.png [--title TEXT]
"""
import argparse
import json
import os
import sys


def parse(path):
    try:
        j = json.load(sys.stdin if path == "-" else open(path, encoding="utf-8"))
        b = j["baselines"]
        read_gbs, peak = float(b["read_gbs"]), float(b["cublas_bf16_tflops"])
        top_k = int(j["shape"]["top_k"])
        rows = [{"T": int(r["tokens"]), "active": float(r["active_experts"]), "tflops": float(r["tflops"]),
                 "ai": float(r["flop_per_byte"]),
                 "pairs": float(r.get("local_pairs", int(r["tokens"]) * top_k))} for r in j["rows"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"{path}: not fp4moe benchmark JSON ({e})")
    if read_gbs <= 0 or peak <= 0:
        sys.exit(f"{path}: no measured baselines (read bandwidth and cuBLAS rate): nothing to draw the roofs from")
    if not rows:
        sys.exit(f"{path}: no result rows")
    return j.get("device", {}).get("name", "GPU"), read_gbs, peak, top_k, j["shape"], rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    device, read_gbs, peak, top_k, shape, rows = parse(a.json)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is needed (Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        sys.exit(3)  # the CLI then tries another python3
    bw = read_gbs / 1e3  # TB/s
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    xs = [0.5, 5000]
    ridge = peak / bw
    ax.plot([xs[0], ridge], [bw * xs[0], peak], color="tab:blue", lw=2,
            label=f"memory roof: {read_gbs:.0f} GB/s measured read")
    ax.plot([ridge, xs[1]], [peak, peak], color="tab:red", lw=2, label=f"compute roof: cuBLAS bf16 {peak:.0f} TFLOP/s")
    for i, r in enumerate(rows):
        # FLOP per byte of the active experts' weights (0.5625 B per weight), as the benchmark counted it.
        ai = r["ai"]
        ax.scatter([ai], [r["tflops"]], color="black", zorder=3)
        per_expert = r["pairs"] / r["active"]
        ax.annotate(f"T={r['T']} ({per_expert:.3g}/expert)", (ai, r["tflops"]), textcoords="offset points",
                    xytext=(6, -12) if i % 2 == 0 else (-10, 8), fontsize=8, ha="left" if i % 2 == 0 else "right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xs)
    ax.set_ylim(1, peak * 2)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of NVFP4 weights incl. scales)")
    ax.set_ylabel("TFLOP/s (whole MoE layer)")
    experts = f"{shape.get('experts')}" + (f"/{shape['global_experts']}" if shape.get("global_experts", shape.get("experts")) != shape.get("experts") else "")
    name = f"E={experts} H={shape.get('hidden')} I={shape.get('intermediate')} top-{top_k}"
    ax.set_title(a.title or f"fp4moe NVFP4 MoE layer ({name}) on {device}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    # Drawn to a temporary file beside the target and renamed over it: a failed write keeps the old plot.
    tmp = f"{a.png}.tmp.{os.getpid()}.png"
    try:
        fig.savefig(tmp)
        os.replace(tmp, a.png)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        sys.exit(f"cannot write {a.png}: {e}")
    print(f"wrote {a.png}: {len(rows)} points, ridge at {ridge:.0f} FLOP/byte")


if __name__ == "__main__":
    main()
