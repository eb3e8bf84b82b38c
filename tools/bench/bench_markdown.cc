// The docs' benchmark table in Markdown (see bench_markdown.h).
// SPDX-License-Identifier: Apache-2.0
#include "bench_markdown.h"

#include <cstdio>

namespace fp4moe::bench {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A time in us with one decimal, "-" where not timed.
std::string us(double v) { return v > 0 ? fmt("%.1f", v) : "-"; }

}  // namespace

std::string markdown_plan_name(const MarkdownPlan& p) {
  if (p.direct) return "direct path";
  std::string s = "bm" + std::to_string(p.block_m);
  if (p.down_k_splits > 1) s += ", down K in " + std::to_string(p.down_k_splits);
  return s;
}

MarkdownRow markdown_row(const MoeBenchRow& r) {
  // A sweep key's plan (kOwnPlanBlockM: the layer's own, its block_m and splits, or the direct path).
  auto plan_of = [&r](int key_bm, int key_splits) {
    if (key_bm == kOwnPlanBlockM) return MarkdownPlan{r.heuristic_direct, r.heuristic_bm, r.heuristic_splits};
    return MarkdownPlan{false, key_bm, key_splits};
  };
  MarkdownRow m;
  m.tokens = r.T;
  m.timed = {r.timed_direct(), r.plan_block_m(r.block_m), r.timed_plan_splits};
  m.weight_bytes = r.weight_bytes;
  m.layer_us = r.layer_us;
  m.graph_us = r.layer_graph_us;
  m.chain_us = r.layer_graph_chain_us;
  m.floor_us = r.floor_us;
  m.cublas_us = r.cublas_us;
  m.fastest_differs = r.fastest_us < r.layer_us;
  m.fastest = plan_of(r.fastest_bm, r.fastest_splits);
  m.fastest_us = r.fastest_us;
  return m;
}

std::string bench_markdown(const MarkdownTable& t) {
  std::string s = t.title + ": read probe " + (t.read_gbs > 0 ? fmt("%.0f", t.read_gbs) + " GB/s" : "not measured") +
                  ", cuBLAS bf16 8192^3 " + (t.cublas_tflops > 0 ? fmt("%.0f", t.cublas_tflops) + " TFLOP/s" : "not measured") +
                  " (this run's); times in us\n\n";
  s += "| T | plan | active MB | layer | graph | chain | chain %BW | floor | cuBLAS bf16 | x | sweep's fastest |\n";
  s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const MarkdownRow& r : t.rows) {
    // weight_bytes / (chain_us * 1e-6 s) over read_gbs * 1e9 B/s, in percent.
    const std::string bw = r.chain_us > 0 && t.read_gbs > 0
                               ? fmt("%.1f%%", r.weight_bytes / (r.chain_us * 1e3) / t.read_gbs * 100.0)
                               : "-";
    const std::string x = r.cublas_us > 0 && r.layer_us > 0 ? fmt("%.2fx", r.cublas_us / r.layer_us) : "-";
    std::string fastest;
    if (r.fastest_differs && r.fastest_us > 0 && r.layer_us > 0)
      fastest = markdown_plan_name(r.fastest) + " " + us(r.fastest_us) + " (" +
                fmt("%+.1f%%", (r.fastest_us / r.layer_us - 1.0) * 100.0) + ")";
    s += "| " + std::to_string(r.tokens) + " | " + markdown_plan_name(r.timed) + " | " + fmt("%.1f", r.weight_bytes / 1e6) +
         " | " + us(r.layer_us) + " | " + us(r.graph_us) + " | " + us(r.chain_us) + " | " + bw + " | " + us(r.floor_us) +
         " | " + us(r.cublas_us) + " | " + x + " | " + fastest + " |\n";
  }
  return s;
}

}  // namespace fp4moe::bench
