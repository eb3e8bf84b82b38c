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

MarkdownRow markdown_row(const MoeBenchRow& r, TimeAt requested) {
  MarkdownRow m;
  m.tokens = r.T;
  m.timed = {r.timed_direct(), r.plan_block_m(r.block_m), r.timed_plan_splits};
  m.pick_not_swept = requested == TimeAt::kLayerPick && !r.timed_at_pick;
  m.weight_bytes = r.weight_bytes;
  m.layer_us = r.layer_us;
  m.graph_us = r.layer_graph_us;
  m.chain_us = r.layer_graph_chain_us;
  m.floor_us = r.floor_us;
  m.cublas_us = r.cublas_us;
  m.fastest = {r.key_direct(r.fastest_bm), r.plan_block_m(r.fastest_bm), r.fastest_plan_splits};
  m.fastest_us = r.fastest_us;
  return m;
}

std::string markdown_conditions(TimeAt time_at, const std::string& routing, double zipf_s, const std::string& finalize,
                                int kernel_arch) {
  std::string s = time_at == TimeAt::kLayerPick ? "timed at the layer's own pick" : "timed at the sweep's fastest";
  s += "; " + routing + (routing == "zipf" ? fmt(" routing (s = %.2f)", zipf_s) : std::string(" routing"));
  s += "; " + finalize + " finalize";
  if (kernel_arch != 0) s += "; the sm_" + std::to_string(kernel_arch) + " configs";
  return s;
}

std::string bench_markdown(const MarkdownTable& t) {
  std::string s = t.title + ": read probe " + (t.read_gbs > 0 ? fmt("%.0f", t.read_gbs) + " GB/s" : "not measured");
  s += ", cuBLAS bf16 8192^3 " + (t.cublas_tflops > 0 ? fmt("%.0f", t.cublas_tflops) + " TFLOP/s" : "not measured");
  s += " (this run's)" + (t.conditions.empty() ? std::string() : "; " + t.conditions) + "; times in us\n\n";
  s += "| T | plan | active MB | layer | graph | chain | chain %BW | floor | cuBLAS bf16 | x | sweep's fastest |\n";
  s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const MarkdownRow& r : t.rows) {
    // weight_bytes / (chain_us * 1e-6 s) over read_gbs * 1e9 B/s, in percent.
    const std::string bw = r.chain_us > 0 && t.read_gbs > 0
                               ? fmt("%.1f%%", r.weight_bytes / (r.chain_us * 1e3) / t.read_gbs * 100.0)
                               : "-";
    const std::string x = r.cublas_us > 0 && r.layer_us > 0 ? fmt("%.2fx", r.cublas_us / r.layer_us) : "-";
    std::string fastest;
    if (r.fastest_differs())
      fastest = markdown_plan_name(r.fastest) + " " + us(r.fastest_us) + " (" +
                fmt("%+.1f%%", (r.fastest_us / r.layer_us - 1.0) * 100.0) + ")";
    const std::string plan = markdown_plan_name(r.timed) + (r.pick_not_swept ? " (the pick was not swept)" : "");
    s += "| " + std::to_string(r.tokens) + " | " + plan + " | " + fmt("%.1f", r.weight_bytes / 1e6) + " | " +
         us(r.layer_us) + " | " + us(r.graph_us) + " | " + us(r.chain_us) + " | " + bw + " | " + us(r.floor_us) +
         " | " + us(r.cublas_us) + " | " + x + " | " + fastest + " |\n";
  }
  return s;
}

}  // namespace fp4moe::bench
